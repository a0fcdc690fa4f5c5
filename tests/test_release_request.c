/* Asking a holder to give a lock up, on a real redis-server: the holder's
 * callback hears the asker's reason for each owner that holds, and only
 * while it holds; the asker learns how many holders listened, that the
 * lock is free, or that the server refused the message; a holder whose
 * pub/sub connection was killed hears requests again once it is back. */
/* ctest-timeout: 180 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "redis_server.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

/* What a holder's callback heard: written on its loop thread before the
 * count goes up, read by the test once the count says so. */
typedef struct heard_log {
    atomic_int calls;
    _Atomic uint64_t owner;
    char reason[HILOCK_REQUEST_REASON_MAX + 1];
} heard_log;

static void on_request(hilock_lock *lock, uint64_t owner, const char *reason,
                       size_t reason_len, void *user_data)
{
    heard_log *log = user_data;
    memcpy(log->reason, reason, reason_len);
    log->reason[reason_len] = '\0';
    (void)lock;
    atomic_store(&log->owner, owner);
    atomic_fetch_add(&log->calls, 1);
}

static void on_released(hilock_lock *lock, int status, int64_t value,
                        void *user_data)
{
    (void)lock, (void)value;
    atomic_store((atomic_int *)user_data, status == HILOCK_OK ? 1 : -1);
}

/* A callback that does what the asker wants: it releases. */
typedef struct giving_up {
    heard_log log;
    atomic_int released;
} giving_up;

static void on_request_give_up(hilock_lock *lock, uint64_t owner,
                               const char *reason, size_t reason_len,
                               void *user_data)
{
    giving_up *g = user_data;
    on_request(lock, owner, reason, reason_len, &g->log);
    assert_int_equal(hilock_lock_release_async(lock, owner, on_released,
                                               &g->released),
                     HILOCK_OK);
}

static void request_channel(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "hilock_release_request:{%s}", name);
}

static int64_t ask(hilock_lock *lock, const char *reason)
{
    int64_t heard = -7;
    assert_status(hilock_lock_request_release(lock, reason, &heard),
                  HILOCK_OK);
    return heard;
}

static bool lock_is_free(void *arg)
{
    bool locked = true;
    return hilock_lock_is_locked(arg, &locked) == HILOCK_OK && !locked;
}

/* The holder hears the reason with its owner, releases, and stops
 * listening; the lock is then free to the asker's eyes. */
static void test_holder_hears_and_gives_up(void **state)
{
    (void)state;
    hilock_client *holder_c = hl_new_client(fx.server, NULL);
    hilock_client *asker_c = hl_new_client(fx.server, NULL);
    hilock_lock *held = hl_new_lock(holder_c, "rr-a");
    hilock_lock *asker = hl_new_lock(asker_c, "rr-a");
    giving_up g = {0};
    char channel[96];
    request_channel("rr-a", channel, sizeof channel);

    assert_status(hilock_lock_set_release_request_callback(
                      held, on_request_give_up, &g),
                  HILOCK_OK);
    /* Not holding: not listening. */
    assert_int_equal(hl_fixture_numsub(fx.server, channel), 0);
    assert_int_equal(ask(asker, "nobody holds it"), -1);
    assert_status(hilock_lock_acquire(held), HILOCK_OK);
    hl_expect_numsub(fx.server, channel, 1, 1);

    assert_int_equal(ask(asker, "deploy 42 needs it"), 1);
    hl_expect_count(&g.log.calls, 1, hl_widen(5000));
    assert_string_equal(g.log.reason, "deploy 42 needs it");
    assert_true(atomic_load(&g.log.owner) == hilock_thread_owner());
    hl_expect_count(&g.released, 1, hl_widen(5000));
    assert_true(hl_wait_until(lock_is_free, asker, hl_widen(5000)));
    hl_expect_numsub(fx.server, channel, 0, 0);
    assert_int_equal(ask(asker, NULL), -1);
    assert_int_equal(atomic_load(&g.log.calls), 1);

    hl_free_lock(held);
    hl_free_lock(asker);
    hl_free_client(holder_c);
    hl_free_client(asker_c);
}

/* Only holders listen: a holder without a callback answers 0, though
 * another handle of the lock has one, and every owner of a holding
 * handle is told, with an empty reason when none was given. */
static void test_only_holders_hear(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *deaf = hl_new_lock(a, "rr-b");
    hilock_lock *idle = hl_new_lock(b, "rr-b");
    heard_log idle_log = {0};
    char channel[96];
    request_channel("rr-b", channel, sizeof channel);

    assert_status(hilock_lock_acquire(deaf), HILOCK_OK);
    assert_status(hilock_lock_set_release_request_callback(idle, on_request,
                                                           &idle_log),
                  HILOCK_OK);
    assert_int_equal(ask(idle, "x"), 0);
    assert_status(hilock_lock_release(deaf), HILOCK_OK);

    /* Two owners of one handle hold a read lock; both are told. */
    hilock_lock *readers = hl_new_read_lock(a, "rr-rw");
    hilock_lock *writer = hl_new_write_lock(b, "rr-rw");
    heard_log log = {0};
    request_channel("rr-rw", channel, sizeof channel);
    assert_status(hilock_lock_set_release_request_callback(readers,
                                                           on_request, &log),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire_as(readers, 11, 0,
                                         HILOCK_LEASE_WATCHDOG, 0, NULL),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire_as(readers, 12, 0,
                                         HILOCK_LEASE_WATCHDOG, 0, NULL),
                  HILOCK_OK);
    hl_expect_numsub(fx.server, channel, 1, 1);
    assert_int_equal(ask(writer, NULL), 1);
    hl_expect_count(&log.calls, 2, hl_widen(5000));
    assert_string_equal(log.reason, "");
    /* One owner gone: the other still listens; both gone: nobody. */
    assert_status(hilock_lock_release_as(readers, 11), HILOCK_OK);
    assert_int_equal(ask(writer, "again"), 1);
    hl_expect_count(&log.calls, 3, hl_widen(5000));
    assert_true(atomic_load(&log.owner) == 12);
    assert_status(hilock_lock_release_as(readers, 12), HILOCK_OK);
    hl_expect_numsub(fx.server, channel, 0, 0);
    assert_int_equal(ask(writer, NULL), -1);
    assert_int_equal(atomic_load(&idle_log.calls), 0);

    hl_free_lock(readers);
    hl_free_lock(writer);
    hl_free_lock(deaf);
    hl_free_lock(idle);
    hl_free_client(a);
    hl_free_client(b);
}

/* The waiting handle of a client with a callback is not told while it
 * waits, and is once it holds. */
static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *got, void *user_data)
{
    (void)lock, (void)got;
    atomic_store((atomic_int *)user_data, status == HILOCK_OK ? 1 : -1);
}

static void test_a_waiter_is_not_told(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *first = hl_new_lock(a, "rr-c");
    hilock_lock *second = hl_new_lock(b, "rr-c");
    heard_log first_log = {0}, second_log = {0};
    char channel[96];
    request_channel("rr-c", channel, sizeof channel);

    assert_status(hilock_lock_set_release_request_callback(first, on_request,
                                                           &first_log),
                  HILOCK_OK);
    assert_status(hilock_lock_set_release_request_callback(
                      second, on_request, &second_log),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire(first), HILOCK_OK);
    atomic_int got = 0;
    uint64_t op = 0;
    assert_status(hilock_lock_acquire_async(second, 77, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            on_acquired, &got, &op),
                  HILOCK_OK);
    hl_expect_pending(b, second, 1);
    hl_expect_numsub(fx.server, channel, 1, 1);
    assert_int_equal(ask(second, "first"), 1);
    hl_expect_count(&first_log.calls, 1, hl_widen(5000));
    assert_status(hilock_lock_release(first), HILOCK_OK);
    hl_expect_count(&got, 1, hl_widen(5000));
    hl_expect_numsub(fx.server, channel, 1, 1);
    assert_int_equal(ask(first, "second"), 1);
    hl_expect_count(&second_log.calls, 1, hl_widen(5000));
    assert_true(atomic_load(&second_log.owner) == 77);
    assert_string_equal(second_log.reason, "second");
    assert_int_equal(atomic_load(&first_log.calls), 1);
    /* Turned off while holding: no longer listening. */
    assert_status(hilock_lock_set_release_request_callback(second, NULL,
                                                           NULL),
                  HILOCK_OK);
    hl_expect_numsub(fx.server, channel, 0, 0);
    assert_int_equal(ask(first, "third"), 0);
    assert_status(hilock_lock_release_as(second, 77), HILOCK_OK);

    hl_free_lock(first);
    hl_free_lock(second);
    hl_free_client(a);
    hl_free_client(b);
}

/* A holder whose lease was lost no longer holds, and no longer listens. */
static void on_lost(hilock_lock *lock, uint64_t owner, void *user_data)
{
    (void)lock, (void)owner;
    atomic_fetch_add((atomic_int *)user_data, 1);
}

static void test_a_lost_lease_stops_listening(void **state)
{
    (void)state;
    hl_client_opts o = {.watchdog_ms = 900};
    hilock_client *a = hl_new_client(fx.server, &o);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *held = hl_new_lock(a, "rr-d");
    hilock_lock *asker = hl_new_lock(b, "rr-d");
    heard_log log = {0};
    atomic_int lost = 0;
    char channel[96];
    request_channel("rr-d", channel, sizeof channel);

    assert_status(hilock_lock_set_release_request_callback(held, on_request,
                                                           &log),
                  HILOCK_OK);
    assert_status(hilock_lock_set_lost_callback(held, on_lost, &lost),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire(held), HILOCK_OK);
    hl_expect_numsub(fx.server, channel, 1, 1);
    assert_int_equal(hl_raw_int(fx.server, "DEL", "rr-d", (char *)NULL), 1);
    hl_expect_count(&lost, 1, hl_widen(10000));
    hl_expect_numsub(fx.server, channel, 0, 0);
    assert_status(hilock_lock_acquire(asker), HILOCK_OK);
    assert_int_equal(ask(asker, "anyone?"), 0);
    assert_int_equal(atomic_load(&log.calls), 0);
    assert_status(hilock_lock_release(asker), HILOCK_OK);
    assert_status(hilock_lock_release(held), HILOCK_ELEASELOST);

    hl_free_lock(held);
    hl_free_lock(asker);
    hl_free_client(a);
    hl_free_client(b);
}

/* The holder's pub/sub connection killed: it subscribes again, and hears
 * the next request. */
static void test_heard_after_pubsub_killed(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *held = hl_new_lock(a, "rr-e");
    hilock_lock *asker = hl_new_lock(b, "rr-e");
    heard_log log = {0};
    char channel[96];
    request_channel("rr-e", channel, sizeof channel);

    assert_status(hilock_lock_set_release_request_callback(held, on_request,
                                                           &log),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire(held), HILOCK_OK);
    hl_expect_numsub(fx.server, channel, 1, 1);
    assert_true(hl_fixture_client_kill(fx.server, "pubsub") >= 1);
    hl_expect_numsub(fx.server, channel, 1, 1);
    assert_int_equal(ask(asker, "after the kill"), 1);
    hl_expect_count(&log.calls, 1, hl_widen(5000));
    assert_string_equal(log.reason, "after the kill");
    assert_status(hilock_lock_release(held), HILOCK_OK);

    hl_free_lock(held);
    hl_free_lock(asker);
    hl_free_client(a);
    hl_free_client(b);
}

/* A user whose ACL denies PUBLISH is told so, with the server's words;
 * nothing reaches the holder. */
static void test_publish_refused(void **state)
{
    (void)state;
    hl_fixture_acl_user_rules(fx.server, "nopub", "nopub-secret",
                              "~* &* +@all -publish -spublish");
    char url[160];
    snprintf(url, sizeof url, "redis://nopub:nopub-secret@127.0.0.1:%d",
             hl_redis_server_port(fx.server));
    hilock_options *o;
    hilock_client *refused_c;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_client_create(&refused_c, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_lock *held = hl_new_lock(a, "rr-f");
    hilock_lock *asker = hl_new_lock(refused_c, "rr-f");
    heard_log log = {0};
    char channel[96];
    request_channel("rr-f", channel, sizeof channel);

    assert_status(hilock_lock_set_release_request_callback(held, on_request,
                                                           &log),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire(held), HILOCK_OK);
    hl_expect_numsub(fx.server, channel, 1, 1);
    int64_t heard = 5;
    assert_status(hilock_lock_request_release(asker, "x", &heard),
                  HILOCK_EPERM);
    assert_int_equal(heard, 0);
    assert_non_null(strstr(hilock_last_error(), "refused the request's "
                                                "PUBLISH"));
    assert_non_null(strstr(hilock_last_error(), "can't run this command"));
    assert_null(strstr(hilock_last_error(), "nopub-secret"));
    assert_status(hilock_lock_release(held), HILOCK_OK);
    assert_int_equal(atomic_load(&log.calls), 0);

    hl_free_lock(held);
    hl_free_lock(asker);
    hl_free_client(a);
    hl_free_client(refused_c);
}

/* A fair lock's holder and a read-write lock's writer hear requests too,
 * asked through a handle of another kind of the same name. */
static void test_fair_and_writer_hear(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *fair = hl_new_fair_lock(a, "rr-fair");
    hilock_lock *fair_asker = hl_new_fair_lock(b, "rr-fair");
    hilock_lock *writer = hl_new_write_lock(a, "rr-w");
    hilock_lock *reader_asker = hl_new_read_lock(b, "rr-w");
    heard_log fair_log = {0}, writer_log = {0};

    assert_status(hilock_lock_set_release_request_callback(fair, on_request,
                                                           &fair_log),
                  HILOCK_OK);
    assert_status(hilock_lock_set_release_request_callback(
                      writer, on_request, &writer_log),
                  HILOCK_OK);
    assert_status(hilock_lock_acquire(fair), HILOCK_OK);
    assert_status(hilock_lock_acquire(writer), HILOCK_OK);
    hl_expect_numsub(fx.server, "hilock_release_request:{rr-fair}", 1, 1);
    hl_expect_numsub(fx.server, "hilock_release_request:{rr-w}", 1, 1);
    assert_int_equal(ask(fair_asker, "fair"), 1);
    assert_int_equal(ask(reader_asker, "write"), 1);
    hl_expect_count(&fair_log.calls, 1, hl_widen(5000));
    hl_expect_count(&writer_log.calls, 1, hl_widen(5000));
    assert_string_equal(fair_log.reason, "fair");
    assert_string_equal(writer_log.reason, "write");
    assert_status(hilock_lock_release(fair), HILOCK_OK);
    assert_status(hilock_lock_release(writer), HILOCK_OK);
    assert_int_equal(ask(fair_asker, NULL), -1);
    assert_int_equal(ask(reader_asker, NULL), -1);

    hl_free_lock(fair);
    hl_free_lock(fair_asker);
    hl_free_lock(writer);
    hl_free_lock(reader_asker);
    hl_free_client(a);
    hl_free_client(b);
}

static void on_asked(hilock_lock *lock, int status, int64_t value,
                     void *user_data)
{
    (void)lock;
    atomic_store((atomic_int *)user_data,
                 status == HILOCK_OK ? (int)value + 100 : -status);
}

/* The async call, and what either refuses. */
static void test_async_and_misuse(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(a, "rr-g");
    atomic_int answer = 0;

    assert_status(hilock_lock_request_release_async(lock, "why", on_asked,
                                                    &answer),
                  HILOCK_OK);
    hl_expect_count(&answer, 99, hl_widen(5000)); /* -1: nobody holds */
    assert_status(hilock_lock_request_release_async(lock, "why", NULL, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_request_release(NULL, NULL, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_lock_set_release_request_callback(NULL, on_request,
                                                           NULL),
                  HILOCK_EINVAL);
    char long_reason[HILOCK_REQUEST_REASON_MAX + 2];
    memset(long_reason, 'r', sizeof long_reason - 1);
    long_reason[sizeof long_reason - 1] = '\0';
    int64_t heard = 3;
    assert_status(hilock_lock_request_release(lock, long_reason, &heard),
                  HILOCK_EINVAL);
    assert_int_equal(heard, 0);
    long_reason[HILOCK_REQUEST_REASON_MAX] = '\0'; /* just fits */
    assert_status(hilock_lock_request_release(lock, long_reason, &heard),
                  HILOCK_OK);
    assert_int_equal(heard, -1);

    hl_free_lock(lock);
    hl_free_client(a);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_holder_hears_and_gives_up),
        T(test_only_holders_hear),
        T(test_a_waiter_is_not_told),
        T(test_a_lost_lease_stops_listening),
        T(test_heard_after_pubsub_killed),
        T(test_fair_and_writer_hear),
        T(test_publish_refused),
        T(test_async_and_misuse),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
