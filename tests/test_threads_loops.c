/* Nothing waits on a loop thread: a call made on the loop thread of one
 * client about a handle of another either hands its work over and
 * returns, or, for a blocking call, refuses with HILOCK_EDEADLK.  Two
 * loops that each waited for the other would never turn again, and with
 * them every callback, lease renewal and answer of both clients. */
/* ctest-timeout: 240 */
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

#include <ev.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/hilock.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "support/busy_loop.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

static hl_lock_fixture fx;

/* ---- crossed multi-locks ------------------------------------------------ */

typedef struct group_round {
    atomic_int calls;
    int status;
} group_round;

static void on_group_acquired(hilock_multilock *m, int status,
                              const hilock_multi_outcome *outcome, void *data)
{
    group_round *r = data;

    (void)m;
    (void)outcome;
    r->status = status;
    atomic_fetch_add(&r->calls, 1);
}

/* Group 1 runs on client a's loop with a member on b, group 2 on b's
 * loop with a member on a.  A third owner holds each group's first
 * member, so every round fails at once and cancels the other member,
 * still asked on the other loop: both loops cancel across at the same
 * moment, round after round.  Should a cancel wait for the other loop,
 * the two wait for each other and no answer comes again. */
static void test_crossed_multilocks_keep_both_loops_turning(void **state)
{
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_client *third = hl_new_client(fx.server, NULL);
    hilock_lock *a1 = hl_new_lock(a, "cross:a1");
    hilock_lock *a2 = hl_new_lock(a, "cross:a2");
    hilock_lock *b1 = hl_new_lock(b, "cross:b1");
    hilock_lock *b2 = hl_new_lock(b, "cross:b2");
    hilock_lock *t1 = hl_new_lock(third, "cross:a1");
    hilock_lock *t2 = hl_new_lock(third, "cross:b2");
    hilock_lock *group1_members[] = {a1, b1};
    hilock_lock *group2_members[] = {b2, a2};
    hilock_multilock *g1, *g2;
    int rounds = hl_scaled(400, 40);

    (void)state;
    assert_status(hilock_multilock_create(&g1, group1_members, 2),
                  HILOCK_OK);
    assert_status(hilock_multilock_create(&g2, group2_members, 2),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(t1, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(t2, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    for (int i = 0; i < rounds; i++) {
        static group_round r1, r2;

        atomic_init(&r1.calls, 0);
        atomic_init(&r2.calls, 0);
        assert_status(hilock_multilock_acquire_async(
                          g1, 1000 + (uint64_t)i, 0, HILOCK_LEASE_WATCHDOG,
                          on_group_acquired, &r1, NULL),
                      HILOCK_OK);
        assert_status(hilock_multilock_acquire_async(
                          g2, 5000 + (uint64_t)i, 0, HILOCK_LEASE_WATCHDOG,
                          on_group_acquired, &r2, NULL),
                      HILOCK_OK);
        /* Each loop answers within a command timeout, unless it waits
         * for the other. */
        if (!hl_wait_count(&r1.calls, 1, hl_widen(10000)) ||
            !hl_wait_count(&r2.calls, 1, hl_widen(10000)))
            fail_msg("round %d: a coordinator's loop stopped answering "
                     "(group 1 %d, group 2 %d answers)",
                     i, atomic_load(&r1.calls), atomic_load(&r2.calls));
        assert_status(r1.status, HILOCK_EBUSY);
        assert_status(r2.status, HILOCK_EBUSY);
    }
    /* Both loops still serve a blocking call. */
    bool locked = false;
    assert_status(hilock_lock_is_locked(a2, &locked), HILOCK_OK);
    assert_status(hilock_lock_is_locked(b1, &locked), HILOCK_OK);
    assert_status(hilock_multilock_destroy(g1), HILOCK_OK);
    assert_status(hilock_multilock_destroy(g2), HILOCK_OK);
    hl_free_lock(a1);
    hl_free_lock(a2);
    hl_free_lock(b1);
    hl_free_lock(b2);
    hl_free_lock(t1);
    hl_free_lock(t2);
    hl_free_client(a);
    hl_free_client(b);
    hl_free_client(third);
}

/* ---- calls made on another client's loop -------------------------------- */

/* What a callback on client a's loop did with client b's handles. */
typedef struct foreign_calls {
    hilock_client *b;
    hilock_lock *b_lock;
    hilock_lock *b_doomed;    /* destroyed from a's loop */
    hilock_multilock *b_group; /* coordinated on b, destroyed from a's */
    uint64_t b_pending_id;    /* an acquire waiting on b, cancelled */
    hilock_semaphore *b_sem;  /* of b: its calls from a's loop */
    hilock_semaphore *b_sem_doomed;
    hilock_latch *b_latch;
    uint64_t b_sem_pending_id;
    uint64_t b_await_id;
    hilock_options *opts;     /* for a client made from a's loop */
    hilock_client *made;      /* NULL unless the make went through */
    const char *urls[3];
    hilock_redlock *rl_made;
    int create_rc, redlock_rc;
    int try_rc, query_rc, stats_rc, cancel_rc, lost_rc, destroy_rc,
        group_lost_rc, group_destroy_rc, sem_rc, latch_rc, sem_cancel_rc,
        sem_lost_rc, sem_destroy_rc, await_cancel_rc, latch_destroy_rc;
    atomic_bool done;
} foreign_calls;

static void blocking_calls_on_a(hilock_lock *lock, int status,
                                const hilock_acquired *acquired, void *data)
{
    foreign_calls *f = data;
    bool locked = false;
    hilock_client_stats stats;

    (void)lock;
    (void)status;
    (void)acquired;
    f->try_rc = hilock_lock_try_acquire(f->b_lock, 0, HILOCK_LEASE_WATCHDOG);
    f->query_rc = hilock_lock_is_locked(f->b_lock, &locked);
    f->stats_rc = hl_client_counters(f->b, &stats);
    f->sem_rc = hilock_semaphore_try_acquire(f->b_sem, 1, 0);
    f->latch_rc = hilock_latch_await(f->b_latch, 0, NULL);
    f->create_rc = hilock_client_create(&f->made, f->opts);
    f->redlock_rc = hilock_redlock_create(&f->rl_made, f->urls, 3, NULL);
    atomic_store(&f->done, true);
}

/* A blocking call about client b made inside a callback of client a
 * would wait for b's loop from a's: refused, as on b's own loop. */
static void test_blocking_call_on_another_clients_loop_is_refused(
    void **state)
{
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *on_a = hl_new_lock(a, "foreign:a");
    static foreign_calls f;

    (void)state;
    memset(&f, 0, sizeof f);
    f.b = b;
    f.b_lock = hl_new_lock(b, "foreign:b");
    assert_status(hilock_semaphore_create(&f.b_sem, b, "foreign:sem"),
                  HILOCK_OK);
    assert_status(hilock_semaphore_set(f.b_sem, 1), HILOCK_OK);
    assert_status(hilock_latch_create(&f.b_latch, b, "foreign:latch"),
                  HILOCK_OK);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(fx.server));
    assert_status(hilock_options_create(&f.opts), HILOCK_OK);
    assert_status(hilock_options_set_url(f.opts, url), HILOCK_OK);
    f.urls[0] = f.urls[1] = f.urls[2] = url;
    assert_status(hilock_lock_acquire_async(on_a, 1, 0, 1000,
                                            0, blocking_calls_on_a, &f,
                                            NULL),
                  HILOCK_OK);
    if (!hl_wait_flag(&f.done, hl_widen(30000)))
        fail_msg("the callback on a's loop did not return");
    assert_status(f.try_rc, HILOCK_EDEADLK);
    assert_status(f.query_rc, HILOCK_EDEADLK);
    assert_status(f.stats_rc, HILOCK_EDEADLK);
    assert_status(f.sem_rc, HILOCK_EDEADLK);
    assert_status(f.latch_rc, HILOCK_EDEADLK);
    hilock_client *made = f.made;
    hilock_redlock *rl_made = f.rl_made;
    if (made != NULL)
        hilock_client_destroy(made);
    if (rl_made != NULL)
        hilock_redlock_destroy(rl_made);
    hilock_options_free(f.opts);
    assert_status(f.create_rc, HILOCK_EDEADLK);
    assert_null(made);
    assert_status(f.redlock_rc, HILOCK_EDEADLK);
    assert_null(rl_made);
    /* Nothing was taken on b. */
    bool locked = true;
    assert_status(hilock_lock_is_locked(f.b_lock, &locked), HILOCK_OK);
    assert_false(locked);
    int64_t free_permits = 0;
    assert_status(hilock_semaphore_available(f.b_sem, &free_permits),
                  HILOCK_OK);
    assert_int_equal(free_permits, 1);
    assert_status(hilock_semaphore_destroy(f.b_sem), HILOCK_OK);
    assert_status(hilock_latch_destroy(f.b_latch), HILOCK_OK);
    hl_free_lock(on_a);
    hl_free_lock(f.b_lock);
    hl_free_client(a);
    hl_free_client(b);
}

/* Runs calls on a's loop (an acquire's callback, through on_a) while
 * b_busy's callback holds b's loop, and fails the test as `what` if the
 * calls (which set *done when through) waited for b's loop.  b's loop is
 * let go either way. */
static void run_on_a_while_b_busy(hilock_lock *on_a, hilock_lock *b_busy,
                                  hilock_acquire_cb *calls, void *data,
                                  atomic_bool *done, const char *what)
{
    static hl_busy_loop bl;
    int give_up_ms = hl_widen(20000);

    hl_busy_loop_hold(b_busy, &bl, give_up_ms);
    assert_status(hilock_lock_acquire_async(on_a, 1, 0, 1000, 0, calls,
                                            data, NULL),
                  HILOCK_OK);
    bool returned = hl_wait_flag(done, give_up_ms / 2);
    if (!hl_busy_loop_release(&bl) || !returned)
        fail_msg("%s waited for b's busy loop", what);
}

static void handing_calls_on_a(hilock_lock *lock, int status,
                               const hilock_acquired *acquired, void *data)
{
    foreign_calls *f = data;

    (void)lock;
    (void)status;
    (void)acquired;
    f->cancel_rc = hilock_lock_cancel(f->b_lock, f->b_pending_id);
    f->lost_rc = hilock_lock_set_lost_callback(f->b_lock, hl_record_lost,
                                               NULL);
    f->destroy_rc = hilock_lock_destroy(f->b_doomed);
    f->group_lost_rc = hilock_multilock_set_lost_callback(
        f->b_group, hl_record_group_lost, NULL);
    f->group_destroy_rc = hilock_multilock_destroy(f->b_group);
    f->sem_cancel_rc = hilock_semaphore_cancel(f->b_sem, f->b_sem_pending_id);
    f->sem_lost_rc = hilock_permit_semaphore_set_lost_callback(
        hl_permits_of(f->b_sem), NULL, NULL);
    f->sem_destroy_rc = hilock_semaphore_destroy(f->b_sem_doomed);
    f->await_cancel_rc = hilock_latch_cancel(f->b_latch, f->b_await_id);
    f->latch_destroy_rc = hilock_latch_destroy(f->b_latch);
    atomic_store(&f->done, true);
}

static void record_sem(hilock_semaphore *s, int status, int64_t value,
                       void *data)
{
    (void)s;
    (void)value;
    hl_value_rec *r = data;
    hl_record_value(NULL, status, 0, r);
}

static void record_latch(hilock_latch *l, int status, int64_t value,
                         void *data)
{
    (void)l;
    (void)value;
    hl_record_value(NULL, status, 0, data);
}

/* Cancel, destroy and settings about b's handles, made inside a callback
 * of client a while b's loop is busy, return without b's loop: a loop
 * that waited for b could be waited for by b, and both would stop.  Each
 * then takes effect once b's loop turns again. */
static void test_calls_on_another_clients_loop_do_not_wait_for_it(
    void **state)
{
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_client *third = hl_new_client(fx.server, NULL);
    hilock_lock *on_a = hl_new_lock(a, "handing:a");
    hilock_lock *b_busy = hl_new_lock(b, "handing:busy");
    hilock_lock *held = hl_new_lock(third, "handing:b");
    hilock_lock *b_group_member;
    static foreign_calls f;
    static hl_acquire_rec pending;

    (void)state;
    memset(&f, 0, sizeof f);
    f.b = b;
    f.b_lock = hl_new_lock(b, "handing:b");
    f.b_doomed = hl_new_lock(b, "handing:doomed");
    b_group_member = hl_new_lock(b, "handing:member");
    assert_status(hilock_multilock_create(&f.b_group, &b_group_member, 1),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(held, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    hl_acquire_rec_init(&pending, b);
    assert_status(hilock_lock_acquire_async(f.b_lock, 7, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &pending,
                                            &f.b_pending_id),
                  HILOCK_OK);
    hl_expect_pending(b, f.b_lock, 1);
    /* A semaphore acquire and a latch await waiting on b, to be
     * cancelled from a's loop. */
    static hl_value_rec sem_pending, await_pending;
    hl_value_rec_init(&sem_pending);
    hl_value_rec_init(&await_pending);
    assert_status(hilock_semaphore_create(&f.b_sem, b, "handing:sem"),
                  HILOCK_OK);
    assert_status(hilock_semaphore_create(&f.b_sem_doomed, b, "handing:sem"),
                  HILOCK_OK);
    assert_status(hilock_semaphore_set(f.b_sem, 0), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(
                      f.b_sem, 1, HILOCK_WAIT_FOREVER, record_sem,
                      &sem_pending, &f.b_sem_pending_id),
                  HILOCK_OK);
    assert_status(hilock_latch_create(&f.b_latch, b, "handing:latch"),
                  HILOCK_OK);
    assert_status(hilock_latch_try_set_count(f.b_latch, 1, NULL), HILOCK_OK);
    assert_status(hilock_latch_await_async(f.b_latch, HILOCK_WAIT_FOREVER,
                                           record_latch, &await_pending,
                                           &f.b_await_id),
                  HILOCK_OK);
    run_on_a_while_b_busy(on_a, b_busy, handing_calls_on_a, &f, &f.done,
                          "a call on a's loop");
    assert_status(f.cancel_rc, HILOCK_OK);
    assert_status(f.lost_rc, HILOCK_OK);
    assert_status(f.destroy_rc, HILOCK_OK);
    assert_status(f.group_lost_rc, HILOCK_OK);
    assert_status(f.group_destroy_rc, HILOCK_OK);
    assert_status(f.sem_cancel_rc, HILOCK_OK);
    assert_status(f.sem_lost_rc, HILOCK_OK);
    assert_status(f.sem_destroy_rc, HILOCK_OK);
    assert_status(f.await_cancel_rc, HILOCK_OK);
    assert_status(f.latch_destroy_rc, HILOCK_OK);
    /* Once b turns again, the cancel ends the waiting acquire. */
    assert_status(hl_expect_acquire(&pending), HILOCK_ECANCELED);
    assert_int_equal(hl_expect_value(&sem_pending, HILOCK_ECANCELED), 0);
    assert_int_equal(hl_expect_value(&await_pending, HILOCK_ECANCELED), 0);
    assert_status(hilock_semaphore_destroy(f.b_sem_doomed), HILOCK_ECLOSED);
    assert_status(hilock_semaphore_destroy(f.b_sem), HILOCK_OK);
    /* The handles are gone: a second destroy finds none. */
    assert_status(hilock_lock_destroy(f.b_doomed), HILOCK_ECLOSED);
    assert_status(hilock_multilock_destroy(f.b_group), HILOCK_ECLOSED);
    hl_free_lock(on_a);
    hl_free_lock(b_busy);
    hl_free_lock(held);
    hl_free_lock(f.b_lock);
    hl_free_lock(b_group_member);
    hl_free_client(a);
    hl_free_client(b);
    hl_free_client(third);
}

/* A client destroyed inside a callback of another: it never waits for the
 * destroyed client's loop thread, busy here, which frees the client by
 * itself once it turns again. */
typedef struct foreign_destroy {
    hilock_client *b;
    int close_rc;
    int destroy_rc;
    atomic_bool done;
} foreign_destroy;

static void destroy_b_on_a(hilock_lock *lock, int status,
                           const hilock_acquired *acquired, void *data)
{
    foreign_destroy *d = data;

    (void)lock;
    (void)status;
    (void)acquired;
    d->close_rc = hilock_client_close(d->b);
    d->destroy_rc = hilock_client_destroy(d->b);
    atomic_store(&d->done, true);
}

static void test_client_destroyed_on_another_clients_loop(void **state)
{
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *on_a = hl_new_lock(a, "client-destroy:a");
    hilock_lock *b_busy = hl_new_lock(b, "client-destroy:busy");
    static foreign_destroy d;

    (void)state;
    memset(&d, 0, sizeof d);
    d.b = b;
    run_on_a_while_b_busy(on_a, b_busy, destroy_b_on_a, &d, &d.done,
                          "destroying b on a's loop");
    assert_status(d.close_rc, HILOCK_OK);
    assert_status(d.destroy_rc, HILOCK_OK);
    /* A handle outlives its client: its destroy waits for b's loop
     * thread to let go of it, if it has not yet. */
    assert_status(hilock_lock_destroy(b_busy), HILOCK_OK);
    hl_free_lock(on_a);
    hl_free_client(a);
}

/* ---- a caller's loop run by another thread ------------------------------ */

typedef struct loop_runner {
    struct ev_loop *loop;
    hilock_client *client;
    int take_rc;
    atomic_bool taken;
    atomic_bool done;
    atomic_bool destroyed;
} loop_runner;

static void *run_the_loop(void *arg)
{
    loop_runner *r = arg;

    r->take_rc = hilock_client_set_loop_thread(r->client);
    atomic_store(&r->taken, true);
    /* Until the client, destroyed on this thread, leaves it nothing to
     * watch. */
    ev_run(r->loop, 0);
    atomic_store(&r->done, true);
    return NULL;
}

static void destroy_on_its_loop(hilock_client *c, int status,
                                hilock_reply *reply, void *data)
{
    loop_runner *r = data;

    (void)status;
    hilock_reply_free(reply);
    if (hilock_client_destroy(c) == HILOCK_OK)
        atomic_store(&r->destroyed, true);
}

/* A client made on this thread, on a loop another thread runs: once that
 * thread has taken the loop over, this one is no loop thread of the
 * client, and its blocking calls are answered. */
static void test_caller_loop_run_by_another_thread(void **state)
{
    static loop_runner r;
    hilock_options *o;
    hilock_lock *l;
    pthread_t runner;
    char url[96];
    const char *ping[] = { "PING" };

    (void)state;
    memset(&r, 0, sizeof r);
    r.loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(r.loop);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(fx.server));
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hilock_options_set_loop(o, r.loop), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_client_create(&r.client, o), HILOCK_OK);
    hilock_options_free(o);
    assert_status(hilock_lock_create(&l, r.client, "taken-over"),
                  HILOCK_OK);
    assert_status(hilock_client_set_loop_thread(NULL), HILOCK_EINVAL);
    assert_int_equal(pthread_create(&runner, NULL, run_the_loop, &r), 0);
    if (!hl_wait_flag(&r.taken, hl_widen(10000)))
        fail_msg("the loop thread did not start");
    assert_status(r.take_rc, HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hilock_lock_destroy(l), HILOCK_OK);
    assert_status(hilock_client_command_async(r.client, 1, ping, NULL,
                                              destroy_on_its_loop, &r),
                  HILOCK_OK);
    hl_join_within(runner, &r.done, hl_widen(10000));
    assert_true(atomic_load(&r.destroyed));
    ev_loop_destroy(r.loop);
}

/* A client on its own loop thread has no loop to hand over. */
static void test_own_loop_thread_cannot_be_taken_over(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);

    (void)state;
    assert_status(hilock_client_set_loop_thread(c), HILOCK_EINVAL);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_crossed_multilocks_keep_both_loops_turning, &fx),
        hl_lock_test(test_blocking_call_on_another_clients_loop_is_refused,
                     &fx),
        hl_lock_test(test_calls_on_another_clients_loop_do_not_wait_for_it,
                     &fx),
        hl_lock_test(test_client_destroyed_on_another_clients_loop, &fx),
        hl_lock_test(test_caller_loop_run_by_another_thread, &fx),
        hl_lock_test(test_own_loop_thread_cannot_be_taken_over, &fx),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
