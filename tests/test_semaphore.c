/* The plain semaphore (RSemaphore layout) on a real server: every call
 * and its errors, async calls and a destroyed handle, contention checked
 * against the permit count, and a waiter for many permits among a stream
 * of single-permit waiters. */
/* ctest-timeout: 120 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

static hl_redis_server *server;

static int group_setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    return server ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    return 0;
}

static void server_get(const char *key, char *out, size_t cap)
{
    assert_true(hl_redis_server_cmd(server, out, cap, "GET", key,
                                    (char *)NULL) > 0);
}

/* ---- every call --------------------------------------------------------- */

static void test_calls(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "sem-calls", false);
    bool set = false;
    int64_t v = -1;
    char raw[64];

    /* Nothing there yet: nothing available, nothing to take. */
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, 0);
    assert_status(hilock_semaphore_try_acquire(s, 1, 0), HILOCK_EBUSY);
    assert_status(hilock_semaphore_try_set(s, 3, &set), HILOCK_OK);
    assert_true(set);
    assert_status(hilock_semaphore_try_set(s, 5, &set), HILOCK_OK);
    assert_false(set);
    server_get("sem-calls", raw, sizeof raw);
    assert_string_equal(raw, "$1\r\n3\r\n"); /* the count, at the name */

    assert_status(hilock_semaphore_try_acquire(s, 2, 0), HILOCK_OK);
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, 1);
    /* Two wanted, one free: refused whole, nothing taken. */
    assert_status(hilock_semaphore_try_acquire(s, 2, 0), HILOCK_EBUSY);
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, 1);
    assert_status(hilock_semaphore_release(s, 2), HILOCK_OK);
    assert_status(hilock_semaphore_add(s, 4, &v), HILOCK_OK);
    assert_int_equal(v, 7);
    assert_status(hilock_semaphore_add(s, -2, &v), HILOCK_OK);
    assert_int_equal(v, 5);
    assert_status(hilock_semaphore_drain(s, &v), HILOCK_OK);
    assert_int_equal(v, 5);
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, 0);
    assert_status(hilock_semaphore_set(s, 2), HILOCK_OK);
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, 2);

    /* A bounded wait that nobody ends. */
    int64_t t0 = hl_now_ms();
    assert_status(hilock_semaphore_try_acquire(s, 3, 200), HILOCK_EBUSY);
    assert_true(hl_now_ms() - t0 >= 190);

    hilock_semaphore_destroy(s);
    hl_free_client(c);
}

/* ---- errors and extreme numbers ----------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "sem-errors", false);
    hilock_semaphore *bad = NULL;
    char id[HILOCK_PERMIT_ID_MAX];
    int64_t v;

    assert_status(hilock_semaphore_create(&bad, c, ""), HILOCK_EINVAL);
    assert_status(hilock_semaphore_create(NULL, c, "x"), HILOCK_EINVAL);
    assert_status(hilock_semaphore_try_acquire(NULL, 1, 0), HILOCK_EINVAL);
    assert_status(hilock_semaphore_try_acquire(s, 0, 0), HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "1.."));
    assert_status(hilock_semaphore_try_acquire(s, -1, 0), HILOCK_EINVAL);
    assert_status(hilock_semaphore_try_acquire(s, INT_MIN, 0),
                  HILOCK_EINVAL);
    assert_status(hilock_semaphore_try_acquire(s, 1, -7), HILOCK_EINVAL);
    assert_status(hilock_semaphore_release(s, 0), HILOCK_EINVAL);
    assert_status(hilock_semaphore_release(s, -3), HILOCK_EINVAL);
    assert_status(hilock_semaphore_set(s, -1), HILOCK_EINVAL);
    assert_status(hilock_semaphore_try_set(s, -1, NULL), HILOCK_EINVAL);
    assert_status(hilock_semaphore_add(s, 0, NULL), HILOCK_EINVAL);
    assert_status(hilock_semaphore_try_acquire_async(s, 1, 0, NULL, NULL, NULL),
                  HILOCK_EINVAL);
    /* Permit ids belong to the other kind. */
    assert_status(hilock_permit_acquire(hl_permits_of(s), 0, 0, id),
                  HILOCK_EINVAL);
    assert_status(hilock_permit_release(hl_permits_of(s), "x"), HILOCK_EINVAL);

    /* INT_MAX permits: a count that large works, and one more than there
     * are is refused, not wrapped. */
    assert_status(hilock_semaphore_set(s, INT_MAX), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(s, INT_MAX, 0), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(s, 1, 0), HILOCK_EBUSY);
    assert_status(hilock_semaphore_release(s, INT_MAX), HILOCK_OK);
    assert_status(hilock_semaphore_add(s, INT_MAX, &v), HILOCK_OK);
    assert_int_equal(v, 2LL * INT_MAX);
    assert_status(hilock_semaphore_set(s, 0), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(s, INT_MAX, 0), HILOCK_EBUSY);

    /* Counts are 64-bit: HILOCK_MAX_PERMITS at once works, one more is
     * refused as too large (never clamped), and so is an add past it. */
    assert_status(hilock_semaphore_set(s, HILOCK_MAX_PERMITS), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(s, HILOCK_MAX_PERMITS, 0),
                  HILOCK_OK);
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, 0);
    assert_status(hilock_semaphore_release(s, HILOCK_MAX_PERMITS), HILOCK_OK);
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, HILOCK_MAX_PERMITS);
    assert_status(hilock_semaphore_try_acquire(s, HILOCK_MAX_PERMITS + 1, 0),
                  HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "too large"));
    assert_status(hilock_semaphore_release(s, INT64_MAX), HILOCK_EINVAL);
    assert_status(hilock_semaphore_set(s, HILOCK_MAX_PERMITS + 1),
                  HILOCK_EINVAL);
    assert_status(hilock_semaphore_add(s, -HILOCK_MAX_PERMITS - 1, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_semaphore_add(s, -HILOCK_MAX_PERMITS, &v),
                  HILOCK_OK);
    assert_int_equal(v, 0);
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, 0);

    /* A name holding another type of value. */
    char raw[64];
    assert_true(hl_redis_server_cmd(server, raw, sizeof raw, "HSET",
                                    "sem-hash", "a", "1", (char *)NULL) > 0);
    hilock_semaphore *h = hl_new_semaphore(c, "sem-hash", false);
    assert_status(hilock_semaphore_try_acquire(h, 1, 0), HILOCK_EREDIS);
    assert_status(hilock_semaphore_release(h, 1), HILOCK_EREDIS);
    hilock_semaphore_destroy(h);
    hilock_semaphore_destroy(s);
    hl_free_client(c);
}

/* An acquire of a semaphore nobody set says so when its wait ends; once
 * set, even to 0, the refusal is the plain one.  A permit semaphore's
 * base handle is its own: destroyed only through the permit semaphore. */
static void test_never_set(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "sem-never-set", false);
    hilock_permit_semaphore *p = NULL;
    char id[HILOCK_PERMIT_ID_MAX];

    assert_status(hilock_semaphore_try_acquire(s, 1, 0), HILOCK_EBUSY);
    assert_non_null(strstr(hilock_last_error(), "never set"));
    assert_status(hilock_semaphore_try_acquire(s, 1, 50), HILOCK_EBUSY);
    assert_non_null(strstr(hilock_last_error(), "never set"));
    assert_status(hilock_semaphore_set(s, 0), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(s, 1, 0), HILOCK_EBUSY);
    assert_null(strstr(hilock_last_error(), "never set"));
    assert_non_null(strstr(hilock_last_error(), "permits"));

    assert_status(hilock_permit_semaphore_create(&p, c, "sem-never-set-p"),
                  HILOCK_OK);
    assert_status(hilock_permit_acquire(p, 0, 1000, id), HILOCK_EBUSY);
    assert_non_null(strstr(hilock_last_error(), "never set"));
    hilock_semaphore *base = hilock_permit_semaphore_base(p);
    assert_status(hilock_semaphore_try_set(base, 1, NULL), HILOCK_OK);
    assert_status(hilock_permit_acquire(p, 0, 1000, id), HILOCK_OK);
    assert_status(hilock_permit_acquire(p, 0, 1000, id), HILOCK_EBUSY);
    assert_null(strstr(hilock_last_error(), "never set"));
    assert_status(hilock_semaphore_destroy(base), HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(),
                           "hilock_permit_semaphore_destroy"));
    assert_null(hilock_permit_semaphore_base(NULL));
    assert_status(hilock_permit_semaphore_destroy(NULL), HILOCK_EINVAL);
    assert_status(hilock_permit_semaphore_destroy(p), HILOCK_OK);
    assert_status(hilock_semaphore_destroy(s), HILOCK_OK);
    hl_free_client(c);
}

/* ---- async -------------------------------------------------------------- */

static void test_async(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_client *c2 = hl_new_client(server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "sem-async", false);
    hilock_semaphore *s2 = hl_new_semaphore(c2, "sem-async", false);
    hl_sem_rec r[8];
    memset(r, 0, sizeof r);

    assert_status(hilock_semaphore_set_async(s, 1, hl_record_sem, &r[0]),
                  HILOCK_OK);
    hl_expect_count(&r[0].calls, 1, hl_widen(5000));
    assert_status(r[0].status, HILOCK_OK);
    assert_status(hilock_semaphore_try_set_async(s, 1, hl_record_sem, &r[1]),
                  HILOCK_OK);
    hl_expect_count(&r[1].calls, 1, hl_widen(5000));
    assert_int_equal(r[1].value, 0);
    assert_status(hilock_semaphore_try_acquire(s, 1, 0), HILOCK_OK);
    /* A waiter on another client, woken by the release's message. */
    assert_status(hilock_semaphore_try_acquire_async(
                      s2, 1, HILOCK_WAIT_FOREVER, hl_record_sem, &r[2], NULL),
                  HILOCK_OK);
    hl_sleep_ms(100);
    assert_int_equal(atomic_load(&r[2].calls), 0);
    int64_t t0 = hl_now_ms();
    assert_status(hilock_semaphore_release_async(s, 1, hl_record_sem, &r[3]),
                  HILOCK_OK);
    hl_expect_count(&r[2].calls, 1, hl_widen(5000));
    assert_status(r[2].status, HILOCK_OK);
    /* Woken by the message, well before the fallback's second. */
    assert_true(hl_now_ms() - t0 < 900 || hl_under_valgrind());
    hl_expect_count(&r[3].calls, 1, hl_widen(5000));
    assert_status(r[3].status, HILOCK_OK);
    /* The waiter's wish was granted the permit in the release itself. */
    int64_t left = -1;
    assert_status(hilock_semaphore_available(s, &left), HILOCK_OK);
    assert_int_equal(left, 0);
    assert_status(hilock_semaphore_add_async(s, 2, hl_record_sem, &r[4]),
                  HILOCK_OK);
    hl_expect_count(&r[4].calls, 1, hl_widen(5000));
    assert_int_equal(r[4].value, 2);
    assert_status(hilock_semaphore_available_async(s, hl_record_sem, &r[5]),
                  HILOCK_OK);
    hl_expect_count(&r[5].calls, 1, hl_widen(5000));
    assert_int_equal(r[5].value, 2);
    assert_status(hilock_semaphore_drain_async(s, hl_record_sem, &r[6]),
                  HILOCK_OK);
    hl_expect_count(&r[6].calls, 1, hl_widen(5000));
    assert_int_equal(r[6].value, 2);

    /* A pending acquire ends with ECANCELED when its handle goes. */
    assert_status(hilock_semaphore_try_acquire_async(
                      s2, 1, HILOCK_WAIT_FOREVER, hl_record_sem, &r[7], NULL),
                  HILOCK_OK);
    hl_sleep_ms(50);
    assert_status(hilock_semaphore_destroy(s2), HILOCK_OK);
    hl_expect_count(&r[7].calls, 1, hl_widen(5000));
    assert_status(r[7].status, HILOCK_ECANCELED);

    hilock_semaphore_destroy(s);
    hl_free_client(c2);
    hl_free_client(c);
}

/* An acquire's and a release's callback get 0 as their value, as
 * semaphore.h says, not the count the server had left: that count is
 * stale by the time it is read, and a grant a release handed over
 * carries none. */
static void test_async_acquire_and_release_value(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "sem-async-value", false);
    hl_sem_rec r[3];
    memset(r, 0, sizeof r);
    assert_status(hilock_semaphore_try_set(s, 3, NULL), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(s, 1, 0, hl_record_sem,
                                                     &r[0], NULL),
                  HILOCK_OK);
    hl_expect_count(&r[0].calls, 1, hl_widen(5000));
    assert_status(r[0].status, HILOCK_OK);
    assert_int_equal(r[0].value, 0);
    assert_status(hilock_semaphore_release_async(s, 1, hl_record_sem, &r[1]),
                  HILOCK_OK);
    hl_expect_count(&r[1].calls, 1, hl_widen(5000));
    assert_status(r[1].status, HILOCK_OK);
    assert_int_equal(r[1].value, 0);
    /* The count itself is the available call's. */
    assert_status(hilock_semaphore_available_async(s, hl_record_sem, &r[2]),
                  HILOCK_OK);
    hl_expect_count(&r[2].calls, 1, hl_widen(5000));
    assert_int_equal(r[2].value, 3);
    hilock_semaphore_destroy(s);
    hl_free_client(c);
}

/* ---- contention --------------------------------------------------------- */

#define PERMITS 3

typedef struct worker {
    pthread_t thread;
    hilock_semaphore *sem;
    int rounds;
    int need;
    atomic_int *inside;
    atomic_int *max_inside;
    int rc;
    atomic_bool done;
    atomic_bool *stop;
    int64_t took_ms;
    int hold_ms;
    int64_t wait_ms;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    w->rc = HILOCK_OK;
    for (int i = 0; (w->rounds == 0 || i < w->rounds) &&
                    (w->stop == NULL || !atomic_load(w->stop));
         i++) {
        int64_t t0 = hl_now_ms();
        int rc = hilock_semaphore_try_acquire(w->sem, w->need, w->wait_ms);
        if (rc != HILOCK_OK) {
            w->rc = rc;
            break;
        }
        w->took_ms = hl_now_ms() - t0;
        int now = atomic_fetch_add(w->inside, w->need) + w->need;
        int m = atomic_load(w->max_inside);
        while (now > m && !atomic_compare_exchange_weak(w->max_inside, &m,
                                                        now))
            ;
        hl_sleep_ms(w->hold_ms);
        atomic_fetch_sub(w->inside, w->need);
        rc = hilock_semaphore_release(w->sem, w->need);
        if (rc != HILOCK_OK) {
            w->rc = rc;
            break;
        }
    }
    atomic_store(&w->done, true);
    return NULL;
}

static void worker_start(worker *w, hilock_semaphore *sem, int rounds,
                         int need, atomic_int *inside, atomic_int *max,
                         atomic_bool *stop, int hold_ms, int64_t wait_ms)
{
    memset(w, 0, sizeof *w);
    w->sem = sem;
    w->rounds = rounds;
    w->need = need;
    w->inside = inside;
    w->max_inside = max;
    w->stop = stop;
    w->hold_ms = hold_ms;
    w->wait_ms = wait_ms;
    atomic_init(&w->done, false);
    assert_int_equal(pthread_create(&w->thread, NULL, worker_main, w), 0);
}

static void test_contention(void **state)
{
    (void)state;
    enum { CLIENTS = 2, WORKERS = 8 };
    hilock_client *c[CLIENTS];
    hilock_semaphore *s[CLIENTS];
    worker w[WORKERS];
    atomic_int inside = 0, max_inside = 0;
    int rounds = hl_under_valgrind() ? 5 : 40;

    for (int i = 0; i < CLIENTS; i++) {
        c[i] = hl_new_client(server, NULL);
        s[i] = hl_new_semaphore(c[i], "sem-contention", false);
    }
    assert_status(hilock_semaphore_set(s[0], PERMITS), HILOCK_OK);
    for (int i = 0; i < WORKERS; i++)
        worker_start(&w[i], s[i % CLIENTS], rounds, 1, &inside, &max_inside,
                     NULL, 1, hl_widen(20000));
    for (int i = 0; i < WORKERS; i++) {
        hl_join_within(w[i].thread, &w[i].done, hl_widen(60000));
        assert_status(w[i].rc, HILOCK_OK);
    }
    /* Never more inside than permits, and the permits were used. */
    assert_true(atomic_load(&max_inside) <= PERMITS);
    assert_true(atomic_load(&max_inside) >= 2);
    int64_t v;
    assert_status(hilock_semaphore_available(s[0], &v), HILOCK_OK);
    assert_int_equal(v, PERMITS);
    for (int i = 0; i < CLIENTS; i++) {
        hilock_semaphore_destroy(s[i]);
        hl_free_client(c[i]);
    }
}

/* ---- a big waiter among small ones --------------------------------------- */

/* Ten single-permit waiters cycle on 4 permits without pause, so some
 * are always held and others always wait; a waiter for all 4 on the same
 * client must still get them within a few holds, since the waiters
 * behind it wait for it.  (Without the line, every release hands the one
 * free permit to a small waiter and the big one waits out its wait.) */
static void test_big_waiter_not_starved(void **state)
{
    (void)state;
    enum { SMALL = 16 };
    hilock_client *c = hl_new_client(server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "sem-big", false);
    worker small[SMALL], big;
    atomic_int inside = 0, max_inside = 0;
    atomic_bool stop = false;

    assert_status(hilock_semaphore_set(s, 4), HILOCK_OK);
    for (int i = 0; i < SMALL; i++) {
        worker_start(&small[i], s, 0, 1, &inside, &max_inside, &stop, 3,
                     hl_widen(20000));
    }
    hl_sleep_ms(100);
    worker_start(&big, s, 3, 4, &inside, &max_inside, NULL, 3,
                 hl_widen(2000));
    hl_join_within(big.thread, &big.done, hl_widen(20000));
    assert_status(big.rc, HILOCK_OK);
    atomic_store(&stop, true);
    for (int i = 0; i < SMALL; i++) {
        hl_join_within(small[i].thread, &small[i].done, hl_widen(20000));
        assert_status(small[i].rc, HILOCK_OK);
    }
    assert_true(atomic_load(&max_inside) <= 4);
    hilock_semaphore_destroy(s);
    hl_free_client(c);
}

/* The line itself: a waiter for 2 queued before a waiter for 1 gets the
 * first 2 permits that come, one at a time; the small one waits behind
 * it although a permit was free before the second came. */
static void test_line_order(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "sem-line", false);
    hilock_semaphore *other = hl_new_semaphore(c, "sem-line", false);
    hl_sem_rec big, small, add1, add2;
    memset(&big, 0, sizeof big);
    memset(&small, 0, sizeof small);
    memset(&add1, 0, sizeof add1);
    memset(&add2, 0, sizeof add2);

    assert_status(hilock_semaphore_set(s, 0), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(
                      s, 2, HILOCK_WAIT_FOREVER, hl_record_sem, &big, NULL),
                  HILOCK_OK);
    /* Through another handle of the same client: the line is the
     * client's, not the handle's. */
    assert_status(hilock_semaphore_try_acquire_async(other, 1,
                                                     HILOCK_WAIT_FOREVER,
                                                     hl_record_sem, &small,
                                                     NULL),
                  HILOCK_OK);
    assert_status(hilock_semaphore_add_async(s, 1, hl_record_sem, &add1),
                  HILOCK_OK);
    hl_expect_count(&add1.calls, 1, hl_widen(5000));
    assert_status(hilock_semaphore_add_async(s, 1, hl_record_sem, &add2),
                  HILOCK_OK);
    hl_expect_count(&big.calls, 1, hl_widen(5000));
    assert_status(big.status, HILOCK_OK);
    assert_int_equal(atomic_load(&small.calls), 0);
    assert_status(hilock_semaphore_release(s, 1), HILOCK_OK);
    hl_expect_count(&small.calls, 1, hl_widen(5000));
    assert_status(small.status, HILOCK_OK);
    hilock_semaphore_destroy(other);
    hilock_semaphore_destroy(s);
    hl_free_client(c);
}

/* A pending acquire ends with ECLOSED when its client closes; a handle
 * destroyed inside its own callback goes cleanly; calls on a closed
 * client's handle say ECLOSED. */
static void on_destroy_me(hilock_semaphore *s, int status, int64_t value,
                          void *data)
{
    hl_record_sem(s, status, value, data);
    hilock_semaphore_destroy(s);
}

static void test_close(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "sem-close", false);
    hilock_semaphore *t = hl_new_semaphore(c, "sem-close", false);
    hl_sem_rec r, d;
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);

    assert_status(hilock_semaphore_set(s, 1), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(t, 1, 0, on_destroy_me,
                                                     &d, NULL),
                  HILOCK_OK);
    hl_expect_count(&d.calls, 1, hl_widen(5000));
    assert_status(d.status, HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(
                      s, 1, HILOCK_WAIT_FOREVER, hl_record_sem, &r, NULL),
                  HILOCK_OK);
    hl_sleep_ms(50);
    assert_int_equal(atomic_load(&r.calls), 0);
    assert_status(hilock_client_close(c), HILOCK_OK);
    hl_expect_count(&r.calls, 1, hl_widen(5000));
    assert_status(r.status, HILOCK_ECLOSED);
    assert_status(hilock_semaphore_release(s, 1), HILOCK_ECLOSED);
    assert_status(hilock_semaphore_destroy(s), HILOCK_OK);
    /* A handle destroyed already is an error, not a use after free. */
    assert_status(hilock_semaphore_destroy(s), HILOCK_ECLOSED);
    assert_status(hilock_semaphore_destroy(NULL), HILOCK_EINVAL);
    hl_free_client(c);
}

/* Scripts the server has run so far (INFO commandstats). */
static long long evalsha_calls(void)
{
    char info[8192];
    assert_true(hl_redis_server_cmd(server, info, sizeof info, "INFO",
                                    "commandstats", (char *)NULL) == '$');
    const char *at = strstr(info, "cmdstat_evalsha:calls=");
    return at ? atoll(at + strlen("cmdstat_evalsha:calls=")) : 0;
}

/* Waiters wait on messages alone: while no permit comes free, five
 * waiters of one client send the server nothing but the renewal of their
 * client's place in line (every third of the waiter timeout, 20 s here),
 * however long they wait, and a release still wakes them. */
static void test_waiters_do_not_poll(void **state)
{
    (void)state;
    hilock_client *c =
        hl_new_client(server, &(hl_client_opts){.waiter_ms = 60000});
    hilock_semaphore *s = hl_new_semaphore(c, "sem-still", false);
    assert_status(hilock_semaphore_set(s, 0), HILOCK_OK);
    hl_sem_rec r[5];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 5; i++)
        assert_status(hilock_semaphore_try_acquire_async(
                          s, 1, HILOCK_WAIT_FOREVER, hl_record_sem, &r[i],
                          NULL),
                      HILOCK_OK);
    /* One subscription on the client's own channel, and, first in line,
     * one on Redisson's. */
    char own[128];
    snprintf(own, sizeof own, "hilock_sem_wake:{sem-still}:%s",
             hilock_client_id(c));
    hl_expect_numsub(server, own, 1, 1);
    hl_expect_numsub(server, "redisson_sc:{sem-still}", 1, 1);
    /* The head asked once when it started, and once more when the
     * subscription was confirmed. */
    long long deadline = hl_now_ms() + hl_widen(5000);
    long long before = evalsha_calls(), now;
    do {
        hl_sleep_ms(200);
        now = evalsha_calls();
    } while (now != before && (before = now, hl_now_ms() < deadline));
    /* Two more seconds of nothing: nobody asks again. */
    hl_sleep_ms(2000);
    assert_int_equal(evalsha_calls(), before);
    for (int i = 0; i < 5; i++)
        assert_int_equal(atomic_load(&r[i].calls), 0);
    assert_status(hilock_semaphore_add(s, 5, NULL), HILOCK_OK);
    for (int i = 0; i < 5; i++) {
        hl_expect_count(&r[i].calls, 1, hl_widen(5000));
        assert_status(r[i].status, HILOCK_OK);
    }
    assert_status(hilock_semaphore_destroy(s), HILOCK_OK);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_never_set),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_async_acquire_and_release_value),
        cmocka_unit_test(test_contention),
        cmocka_unit_test(test_big_waiter_not_starved),
        cmocka_unit_test(test_line_order),
        cmocka_unit_test(test_close),
        cmocka_unit_test(test_waiters_do_not_poll),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
