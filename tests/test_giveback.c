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

#include <pthread.h>
#include <unistd.h>

#include <ev.h>
#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/options.h"
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
    /* No answer in time: counted as released, and said so. */
    hl_expect_value(&holder_rel, HILOCK_EINDOUBT);
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

/* ---- a blocking acquire whose loop does not answer in time ------------ */

/* A client on a loop of the test's own, whose thread does not run the
 * loop at first, as a caller that blocks its own loop would.  The other
 * thread's blocking acquire gives up meanwhile; when the loop runs, the
 * acquire it started must not take the lock for nobody. */
typedef struct stalled_loop {
    pthread_t thread;
    struct ev_loop *loop;
    ev_async stop;
    hilock_client *client;
    hilock_lock *lock;
    int block_ms;
    int setup_rc;
    atomic_bool ready;
    atomic_bool done;
} stalled_loop;

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
    stalled_loop *sl = w->data;

    (void)revents;
    /* The client goes on its loop's thread, which then has nothing left
     * to run but the stop watcher. */
    hilock_lock_destroy(sl->lock);
    hilock_client_destroy(sl->client);
    ev_async_stop(loop, w);
}

static void *stalled_loop_main(void *arg)
{
    stalled_loop *sl = arg;
    hilock_options *o = NULL;
    int64_t timeout = hl_under_valgrind() ? 1500 : 200;
    int rc = hilock_options_create(&o);

    if (rc == HILOCK_OK)
        rc = hilock_options_set_host(o, "127.0.0.1");
    if (rc == HILOCK_OK)
        rc = hilock_options_set_port(o, hl_redis_server_port(fx.server));
    if (rc == HILOCK_OK)
        rc = hilock_options_set_command_timeout_ms(o, timeout);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_connect_timeout_ms(o, timeout);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_loop(o, sl->loop);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&sl->client, o);
    if (rc == HILOCK_OK)
        rc = hilock_lock_create(&sl->lock, sl->client, "stalled");
    hilock_options_free(o);
    sl->setup_rc = rc;
    ev_async_init(&sl->stop, on_stop);
    sl->stop.data = sl;
    if (rc == HILOCK_OK)
        ev_async_start(sl->loop, &sl->stop);
    atomic_store(&sl->ready, true);
    if (rc == HILOCK_OK) {
        hl_sleep_ms(sl->block_ms); /* the caller keeps its loop busy */
        ev_run(sl->loop, 0);
    }
    atomic_store(&sl->done, true);
    return NULL;
}

static void test_blocking_acquire_timeout_leaves_no_grant(void **state)
{
    static stalled_loop sl;
    int64_t t0, took, count = 0;
    int rc;

    (void)state;
    memset(&sl, 0, sizeof sl);
    sl.loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(sl.loop);
    /* Past the blocking call's limit: twice the command timeout, the
     * connect timeout and a second. */
    sl.block_ms = hl_under_valgrind() ? 7000 : 2500;
    atomic_init(&sl.ready, false);
    atomic_init(&sl.done, false);
    assert_int_equal(pthread_create(&sl.thread, NULL, stalled_loop_main,
                                    &sl), 0);
    assert_true(hl_wait_flag(&sl.ready, hl_widen(10000)));
    assert_status(sl.setup_rc, HILOCK_OK);
    t0 = hl_now_ms();
    rc = hilock_lock_try_acquire(sl.lock, 0, HILOCK_LEASE_WATCHDOG);
    took = hl_now_ms() - t0;
    /* The call gave up on the loop, and says so. */
    assert_status(rc, HILOCK_ETIMEDOUT);
    /* The acquire it started may have reached the server before its
     * cancel: what it took there goes back, rather than being held and
     * renewed for a thread that was told it failed.  The thread's next
     * acquire goes to the server after that give-back, and finds the
     * lock free: one hold, which its one release ends. */
    assert_status(hilock_lock_try_acquire(sl.lock, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_hold_count(sl.lock, &count), HILOCK_OK);
    if (count != 1)
        fail_msg("%lld holds on the server after one acquire; the one "
                 "reported as timed out took the lock", (long long)count);
    assert_status(hilock_lock_release(sl.lock), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "stalled"), 0);
    /* It returned once the loop had run the acquire's cancel, after the
     * stall, not at its limit. */
    assert_true(took >= sl.block_ms - 100);
    ev_async_send(sl.loop, &sl.stop);
    hl_join_within(sl.thread, &sl.done, hl_widen(10000));
    ev_loop_destroy(sl.loop);
}

/* ---- a reconcile the server never answers ----------------------------- */

/* A reconcile keeps the owner's next acquires behind it, since they could
 * be granted beside what it is about to remove.  Against a server that
 * does not answer, it must not do so for longer than the grant it is
 * about can last: then every such grant has run out on the server, and a
 * new acquire should meet the server itself, not a request of the past. */
static void test_reconcile_gives_up_after_the_lease(void **state)
{
    const int64_t lease_ms = hl_under_valgrind() ? 4000 : 1000;
    const hl_client_opts opts = {
        .command_timeout_ms = hl_under_valgrind() ? 1000 : 200 };
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *l = hl_new_lock(c, "unanswered");
    int64_t t0;

    (void)state;
    hl_fixture_pause(fx.server);
    t0 = hl_now_ms();
    assert_status(hilock_lock_try_acquire(l, 0, lease_ms), HILOCK_ETIMEDOUT);
    /* The attempt's outcome is unknown: its reconcile has the turn. */
    assert_status(hilock_lock_try_acquire(l, 0, lease_ms), HILOCK_ETIMEDOUT);
    assert_non_null(strstr(hilock_last_error(), "earlier request"));
    /* The lease of anything the first attempt took has run out, and the
     * reconcile has failed once more since. */
    hl_sleep_ms((int)(lease_ms + 3 * opts.command_timeout_ms -
                      (hl_now_ms() - t0)));
    assert_status(hilock_lock_try_acquire(l, 0, lease_ms), HILOCK_ETIMEDOUT);
    if (strstr(hilock_last_error(), "earlier request") != NULL)
        fail_msg("%lld ms after an attempt with a %lld ms lease, its "
                 "reconcile still holds the owner's acquires back",
                 (long long)(hl_now_ms() - t0), (long long)lease_ms);
    hl_fixture_resume(fx.server);
    assert_status(hilock_lock_try_acquire(l, hl_widen(5000), lease_ms),
                  HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_cancelled_grant_spares_newer),
        T(test_wake_during_reconcile_sends_no_second_attempt),
        T(test_blocking_acquire_timeout_leaves_no_grant),
        T(test_reconcile_gives_up_after_the_lease),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
