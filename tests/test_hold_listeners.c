/* Hold listeners (engine/compose.h): what a layer built on lock handles,
 * such as the multi-lock, hears of a handle's holds.  Any number of
 * listeners per handle, each told of every lost hold before the user's
 * lost callback, and once with owner 0 when the client closes; removed,
 * never named again. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/engine/compose.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

/* Who was told what, in order, across listeners and the lost callback. */
#define MAX_EVENTS 16

typedef struct event_log {
    pthread_mutex_t mu;
    int n;
    char who[MAX_EVENTS];
    uint64_t owner[MAX_EVENTS];
    atomic_int count;
} event_log;

static event_log events;

static void log_reset(void)
{
    pthread_mutex_lock(&events.mu);
    events.n = 0;
    atomic_store(&events.count, 0);
    pthread_mutex_unlock(&events.mu);
}

static void note(char who, uint64_t owner)
{
    pthread_mutex_lock(&events.mu);
    if (events.n < MAX_EVENTS) {
        events.who[events.n] = who;
        events.owner[events.n] = owner;
        events.n++;
    }
    pthread_mutex_unlock(&events.mu);
    atomic_fetch_add(&events.count, 1);
}

/* data names the listener: 'a', 'b', or 'u' for the user's callback. */
/* The handle's listeners; none before its rare parts exist. */
static hl_hold_listener *listeners_of(const hilock_lock *l)
{
    hl_lock_rare *r = hl_lock_rare_peek(l);
    return r != NULL ? r->listeners : NULL;
}

static void on_event(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock;
    note(*(const char *)data, owner);
}

static const char name_a = 'a', name_b = 'b', name_user = 'u';

static bool count_reached(void *want)
{
    return atomic_load(&events.count) >= *(int *)want;
}

static void wait_events(int want)
{
    if (!hl_wait_until(count_reached, &want, hl_widen(5000)))
        fail_msg("%d of %d events in time", atomic_load(&events.count),
                 want);
}

static hl_redis_server *server;

static int setup(void **state)
{
    (void)state;
    pthread_mutex_init(&events.mu, NULL);
    server = hl_fixture_plain();
    return server ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    pthread_mutex_destroy(&events.mu);
    return 0;
}

/* Delete the lock behind the holder's back: its next renewal finds it
 * gone and the lease is lost. */
static void steal(hilock_client *other, const char *name)
{
    const char *argv[] = {"DEL", name};
    hilock_reply *r = NULL;
    assert_int_equal(hilock_client_command(other, 2, argv, NULL, &r),
                     HILOCK_OK);
    hilock_reply_free(r);
}

static void test_every_listener_told_before_the_user(void **state)
{
    (void)state;
    hilock_client *c =
        hl_new_client(server, &(hl_client_opts){.watchdog_ms = 300});
    hilock_client *other = hl_new_client(server, NULL);
    hilock_lock *l = hl_new_lock(c, "listened");
    hl_hold_listener a = {.cb = on_event, .data = (void *)&name_a};
    hl_hold_listener b = {.cb = on_event, .data = (void *)&name_b};

    log_reset();
    assert_int_equal(hl_lock_listen(l, &a), HILOCK_OK);
    assert_int_equal(hl_lock_listen(l, &b), HILOCK_OK);
    assert_int_equal(hilock_lock_set_lost_callback(l, on_event,
                                                   (void *)&name_user),
                     HILOCK_OK);
    uint64_t me = hilock_thread_owner();
    assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    steal(other, "listened");
    wait_events(3);
    pthread_mutex_lock(&events.mu);
    assert_int_equal(events.n, 3);
    /* Both listeners, in either order, then the user. */
    assert_true((events.who[0] == 'a' && events.who[1] == 'b') ||
                (events.who[0] == 'b' && events.who[1] == 'a'));
    assert_int_equal(events.who[2], 'u');
    for (int i = 0; i < 3; i++)
        assert_int_equal(events.owner[i], me);
    pthread_mutex_unlock(&events.mu);

    /* One removed: the next loss reaches only the other.  The user's
     * callback comes last, so once it has, every listener still linked
     * has been told. */
    log_reset();
    assert_int_equal(hl_lock_unlisten(l, &a), HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    steal(other, "listened");
    wait_events(2);
    pthread_mutex_lock(&events.mu);
    assert_int_equal(events.n, 2);
    assert_int_equal(events.who[0], 'b');
    assert_int_equal(events.who[1], 'u');
    assert_int_equal(events.owner[0], me);
    pthread_mutex_unlock(&events.mu);

    assert_int_equal(hl_lock_unlisten(l, &b), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

/* A reentrant acquire that finds the older hold gone tells the
 * listeners, then the user, before it returns: no renewal comes within
 * the test to tell them instead. */
static void test_told_by_a_reentrant_acquire(void **state)
{
    (void)state;
    hilock_client *c =
        hl_new_client(server, &(hl_client_opts){.watchdog_ms = 30000});
    hilock_client *other = hl_new_client(server, NULL);
    hilock_lock *l = hl_new_lock(c, "reentered");
    hl_hold_listener a = {.cb = on_event, .data = (void *)&name_a};

    log_reset();
    assert_int_equal(hl_lock_listen(l, &a), HILOCK_OK);
    assert_int_equal(hilock_lock_set_lost_callback(l, on_event,
                                                   (void *)&name_user),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    steal(other, "reentered");
    assert_int_equal(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                     HILOCK_OK);
    /* Read under the mutex, judged after it: a failure must not leave it
     * held for the tests that follow. */
    pthread_mutex_lock(&events.mu);
    int n = events.n;
    char first = events.who[0], second = events.who[1];
    uint64_t owner = events.owner[0];
    pthread_mutex_unlock(&events.mu);
    assert_int_equal(n, 2);
    assert_int_equal(first, 'a');
    assert_int_equal(second, 'u');
    assert_int_equal(owner, hilock_thread_owner());
    assert_int_equal(hilock_lock_release(l), HILOCK_OK);
    assert_int_equal(hilock_lock_release(l), HILOCK_ELEASELOST);
    assert_int_equal(hl_lock_unlisten(l, &a), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(other);
    hl_free_client(c);
}

static void test_closing_client_tells_owner_zero(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_lock *l = hl_new_lock(c, "closing");
    hl_hold_listener a = {.cb = on_event, .data = (void *)&name_a};
    hl_hold_listener b = {.cb = on_event, .data = (void *)&name_b};

    log_reset();
    assert_int_equal(hl_lock_listen(l, &a), HILOCK_OK);
    assert_int_equal(hl_lock_listen(l, &b), HILOCK_OK);
    assert_int_equal(hilock_client_close(c), HILOCK_OK);
    wait_events(2);
    pthread_mutex_lock(&events.mu);
    assert_int_equal(events.n, 2);
    assert_int_equal(events.owner[0], 0);
    assert_int_equal(events.owner[1], 0);
    assert_true(events.who[0] != events.who[1]);
    pthread_mutex_unlock(&events.mu);

    /* After the close: refused, and nothing is left linked. */
    hl_hold_listener late = {.cb = on_event, .data = (void *)&name_a};
    assert_int_equal(hl_lock_listen(l, &late), HILOCK_ECLOSED);
    assert_null(late.next);
    assert_int_equal(hl_lock_unlisten(l, &a), HILOCK_ECLOSED);
    assert_int_equal(hl_lock_unlisten(l, &b), HILOCK_ECLOSED);
    assert_null(listeners_of(l));
    hl_free_lock(l);
    hl_free_client(c);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_lock *l = hl_new_lock(c, "args");
    hl_hold_listener none = {.cb = NULL};
    hl_hold_listener a = {.cb = on_event, .data = (void *)&name_a};

    assert_int_equal(hl_lock_listen(l, NULL), HILOCK_EINVAL);
    assert_int_equal(hl_lock_listen(l, &none), HILOCK_EINVAL);
    assert_int_equal(hl_lock_listen(NULL, &a), HILOCK_EINVAL);
    assert_int_equal(hl_lock_unlisten(l, NULL), HILOCK_EINVAL);
    assert_int_equal(hl_lock_unlisten(NULL, &a), HILOCK_EINVAL);
    /* Removing one that never listened changes nothing. */
    assert_int_equal(hl_lock_unlisten(l, &a), HILOCK_OK);
    assert_null(listeners_of(l));
    hl_free_lock(l);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_listener_told_before_the_user),
        cmocka_unit_test(test_told_by_a_reentrant_acquire),
        cmocka_unit_test(test_closing_client_tells_owner_zero),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
