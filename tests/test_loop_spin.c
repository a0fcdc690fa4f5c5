/* The loop thread's own busy polling, by default: it stays awake after a
 * request only for about twice the round trip, so an idle client costs
 * no CPU, and an answer that does not come (the server stopped) costs
 * only that short spin, however long it is awaited.  The CPU is the loop
 * thread's own clock (pthread_getcpuclockid), read over a second of
 * each. */
/* ctest-timeout: 120 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/runtime/op.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

/* The loop thread's CPU time so far, in µs. */
static int64_t loop_cpu_us(hilock_client *c)
{
    clockid_t id;
    struct timespec ts;
    assert_int_equal(pthread_getcpuclockid(c->thread, &id), 0);
    assert_int_equal(clock_gettime(id, &ts), 0);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* How much of a core the loop thread used over the next ms. */
static double loop_share_over(hilock_client *c, int ms)
{
    int64_t cpu = loop_cpu_us(c);
    int64_t from = hl_now_ms();
    hl_sleep_ms(ms);
    int64_t wall_us = (hl_now_ms() - from) * 1000;
    return (double)(loop_cpu_us(c) - cpu) / (double)wall_us;
}

typedef struct answers {
    atomic_int calls;
    atomic_int failed;
} answers;

static void on_answer(hilock_client *c, int status, hilock_reply *reply,
                      void *data)
{
    (void)c;
    answers *a = data;
    if (status != HILOCK_OK)
        atomic_fetch_add(&a->failed, 1);
    hilock_reply_free(reply);
    atomic_fetch_add(&a->calls, 1);
}

static void send_incr(hilock_client *c, answers *a)
{
    const char *argv[] = {"INCR", "loop-spin"};
    assert_status(hilock_client_command_async(c, 2, argv, NULL, on_answer, a),
                  HILOCK_OK);
}

/* A client that has answered a burst of async commands sleeps: its loop
 * thread uses almost no CPU while nothing is asked of it. */
static void test_an_idle_loop_sleeps(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    assert_int_equal(hilock_options_busy_poll_us(c->opts), 0);
    static answers a;
    atomic_store(&a.calls, 0);
    atomic_store(&a.failed, 0);
    for (int i = 0; i < 200; i++)
        send_incr(c, &a);
    hl_expect_count(&a.calls, 200, hl_widen(10000));
    assert_int_equal(atomic_load(&a.failed), 0);
    double share = loop_share_over(c, 1000);
    printf("# idle after 200 answers: the loop thread used %.2f %% of a "
           "core\n",
           share * 100);
    assert_true(share < 0.05);
    hl_free_client(c);
}

/* An answer that does not come, the server being stopped: the loop
 * thread spins only its short while after the request, then sleeps
 * until the answer comes, which it still delivers. */
static void test_a_late_answer_is_awaited_asleep(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    static answers a;
    atomic_store(&a.calls, 0);
    atomic_store(&a.failed, 0);
    /* A round trip measured first, so that the loop would spin. */
    for (int i = 0; i < 20; i++)
        send_incr(c, &a);
    hl_expect_count(&a.calls, 20, hl_widen(10000));
    assert_true(atomic_load(&c->rtt_us) > 0);
    hl_fixture_pause(fx.server);
    send_incr(c, &a);
    double share = loop_share_over(c, 1000);
    hl_fixture_resume(fx.server);
    hl_expect_count(&a.calls, 21, hl_widen(10000));
    printf("# an answer 1 s late: the loop thread used %.2f %% of a core "
           "meanwhile\n",
           share * 100);
    assert_int_equal(atomic_load(&a.failed), 0);
    assert_true(share < 0.05);
    hl_free_client(c);
}

typedef struct async_hold {
    atomic_int status; /* -1 until the callback */
} async_hold;

static void on_async_acquired(hilock_lock *lock, int status,
                              const hilock_acquired *acquired, void *data)
{
    (void)lock;
    (void)acquired;
    atomic_store(&((async_hold *)data)->status, status);
}

static void on_async_released(hilock_lock *lock, int status, int64_t value,
                              void *data)
{
    (void)lock;
    (void)value;
    atomic_store((atomic_int *)data, status);
}

/* A blocking acquire that waits in line waits asleep: its op is parked
 * as soon as the loop knows it waits for a turn, and its caller stops
 * spinning then, rather than spin out its bound for a turn that may be
 * long in coming (with many processes in line, such spins took the cores
 * from the holders and the server).  A caller spins only when round
 * trips are short enough, and on a handle none of whose attempts found
 * the lock taken yet (a fresh one each round), so the rounds are several,
 * and they go on until one ends its spin parked, up to 100.  A spin can
 * also run out before the loop thread has the op, which says nothing
 * either way and on a slow machine (a sanitizer's, a busy one) is
 * common: under ThreadSanitizer one round in 100 could spin, and it ran
 * out.  Three spins run out with none parked say the loop does not park
 * a queued op. */
static void test_a_queued_blocking_waiter_sleeps(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la, *lb;
    assert_status(hilock_lock_create(&la, a, "spin-line"), HILOCK_OK);
    assert_status(hilock_lock_create(&lb, b, "spin-line"), HILOCK_OK);
    bool held;
    for (int i = 0; i < 20; i++)
        assert_status(hilock_lock_is_locked(lb, &held), HILOCK_OK);
    int could_spin = 0, rounds = 0, spun = 0;
    long parked_total = 0;
    for (; rounds < 100 && parked_total == 0; rounds++) {
        assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
        static async_hold first;
        atomic_store(&first.status, -1);
        assert_status(hilock_lock_acquire_async(lb, 77, hl_widen(10000),
                                                30000, 0, on_async_acquired,
                                                &first, NULL),
                      HILOCK_OK);
        /* Refused and in line, so that the next waiter queues behind. */
        int64_t until = hl_now_ms() + hl_widen(10000);
        while (hl_raw_int(fx.server, "LLEN", "hilock_lock_line:{spin-line}",
                          (char *)NULL) != 1)
            assert_true(hl_now_ms() < until), hl_sleep_ms(1);
        could_spin += hl_client_blocking_spin_us(b) > 0;
        long answered, parked, ran_out, parked0, ran_out0;
        hl_op_spin_counts(&answered, &parked0, &ran_out0);
        hilock_lock *fresh;
        assert_status(hilock_lock_create(&fresh, b, "spin-line"), HILOCK_OK);
        static hl_acquirer second;
        hl_acquirer_start(&second, fresh, hl_widen(10000), 30000, true);
        /* Its spin over, or its op queued long enough ago. */
        until = hl_now_ms() + 200;
        do {
            hl_sleep_ms(1);
            hl_op_spin_counts(&answered, &parked, &ran_out);
        } while (parked == parked0 && ran_out == ran_out0 &&
                 hl_now_ms() < until);
        parked_total += parked - parked0;
        spun += parked != parked0 || ran_out != ran_out0;
        assert_status(hilock_lock_release(la), HILOCK_OK);
        hl_expect_count(&first.status, HILOCK_OK, hl_widen(10000));
        static atomic_int released;
        atomic_store(&released, -1);
        assert_status(hilock_lock_release_async(lb, 77, on_async_released,
                                                &released),
                      HILOCK_OK);
        hl_expect_count(&released, HILOCK_OK, hl_widen(10000));
        hl_acquirer_join(&second, hl_widen(10000));
        assert_status(second.rc, HILOCK_OK);
        assert_status(second.release_rc, HILOCK_OK);
        hilock_lock_destroy(fresh);
    }
    printf("# %d blocking waiters in line: %d could spin, %d spun, %ld "
           "stopped spinning when parked\n",
           rounds, could_spin, spun, parked_total);
    if (spun >= 3)
        assert_true(parked_total >= 1);
    hilock_lock_destroy(lb);
    hilock_lock_destroy(la);
    hl_free_client(b);
    hl_free_client(a);
}

static long spins_so_far(void)
{
    long answered, parked, ran_out;
    hl_op_spin_counts(&answered, &parked, &ran_out);
    return answered + parked + ran_out;
}

/* A lock passed between processes needs the cores for the process it is
 * passed to: once an attempt of a handle found the lock taken by another,
 * that handle's blocking calls sleep for their answers rather than spin
 * (with 8 processes taking turns on 2 cores, the spins took the cores
 * from the next holder; docs/internals/transport.md).  A lone caller on a
 * lock nobody else takes still spins.  The other holder here is taken
 * and let go asynchronously, which never spins. */
static void test_a_caller_taking_turns_does_not_spin(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la, *lb, *alone;
    assert_status(hilock_lock_create(&la, a, "spin-turns"), HILOCK_OK);
    assert_status(hilock_lock_create(&lb, b, "spin-turns"), HILOCK_OK);
    assert_status(hilock_lock_create(&alone, b, "spin-alone"), HILOCK_OK);
    bool held;
    for (int i = 0; i < 20; i++)
        assert_status(hilock_lock_is_locked(alone, &held), HILOCK_OK);
    bool could_spin = hl_client_blocking_spin_us(b) > 0;

    long before = spins_so_far();
    assert_status(hilock_lock_try_acquire(alone, 0, 30000), HILOCK_OK);
    assert_status(hilock_lock_release(alone), HILOCK_OK);
    long alone_spins = spins_so_far() - before;

    static async_hold other;
    atomic_store(&other.status, -1);
    assert_status(hilock_lock_acquire_async(la, 77, 0, 30000, 0,
                                            on_async_acquired, &other, NULL),
                  HILOCK_OK);
    hl_expect_count(&other.status, HILOCK_OK, hl_widen(10000));
    /* Found taken by another: from now on this handle takes turns. */
    assert_status(hilock_lock_try_acquire(lb, 0, 30000), HILOCK_EBUSY);

    before = spins_so_far();
    static hl_acquirer turn;
    hl_acquirer_start(&turn, lb, hl_widen(10000), 30000, true);
    int64_t until = hl_now_ms() + hl_widen(10000);
    while (hl_raw_int(fx.server, "LLEN", "hilock_lock_line:{spin-turns}",
                      (char *)NULL) != 1)
        assert_true(hl_now_ms() < until), hl_sleep_ms(1);
    static atomic_int released;
    atomic_store(&released, -1);
    assert_status(hilock_lock_release_async(la, 77, on_async_released,
                                            &released),
                  HILOCK_OK);
    hl_expect_count(&released, HILOCK_OK, hl_widen(10000));
    hl_acquirer_join(&turn, hl_widen(10000));
    assert_status(turn.rc, HILOCK_OK);
    assert_status(turn.release_rc, HILOCK_OK);
    long turn_spins = spins_so_far() - before;

    printf("# a lone caller: %s, %ld spins; a caller taking turns: %ld "
           "spins\n",
           could_spin ? "could spin" : "could not spin", alone_spins,
           turn_spins);
    if (could_spin)
        assert_true(alone_spins >= 1);
    assert_int_equal(turn_spins, 0);
    hilock_lock_destroy(alone);
    hilock_lock_destroy(lb);
    hilock_lock_destroy(la);
    hl_free_client(b);
    hl_free_client(a);
}

static void on_sem_answer(hilock_semaphore *sem, int status, int64_t value,
                          void *data)
{
    (void)sem;
    (void)value;
    atomic_store((atomic_int *)data, status);
}

typedef struct sem_turn {
    pthread_t thread;
    hilock_semaphore *sem;
    int acquire_rc;
    int release_rc;
    atomic_bool done;
} sem_turn;

static void *sem_turn_main(void *arg)
{
    sem_turn *t = arg;
    t->acquire_rc = hilock_semaphore_try_acquire(t->sem, 1, hl_widen(10000));
    t->release_rc = t->acquire_rc == HILOCK_OK
                        ? hilock_semaphore_release(t->sem, 1)
                        : -1;
    atomic_store(&t->done, true);
    return NULL;
}

/* The same for a semaphore of one permit, whose calls other than the
 * acquire reach the loop their own way: a caller that found the permit
 * taken by another waits for it, then gives it back, without a spin. */
static void test_a_semaphore_taking_turns_does_not_spin(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_semaphore *sa = hl_new_semaphore(a, "spin-permits", false);
    hilock_semaphore *sb = hl_new_semaphore(b, "spin-permits", false);
    static atomic_int taken, given;
    atomic_store(&taken, -1);
    atomic_store(&given, -1);
    assert_status(hilock_semaphore_set(sa, 1), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(sa, 1, 0, on_sem_answer,
                                                     &taken, NULL),
                  HILOCK_OK);
    hl_expect_count(&taken, HILOCK_OK, hl_widen(10000));
    assert_status(hilock_semaphore_try_acquire(sb, 1, 0), HILOCK_EBUSY);

    long before = spins_so_far();
    static sem_turn turn;
    turn.sem = sb;
    turn.acquire_rc = turn.release_rc = -1;
    atomic_store(&turn.done, false);
    assert_int_equal(pthread_create(&turn.thread, NULL, sem_turn_main, &turn),
                     0);
    hl_expect_idle(b, hl_semaphore_lock(sb), 1);
    assert_status(hilock_semaphore_release_async(sa, 1, on_sem_answer,
                                                 &given),
                  HILOCK_OK);
    hl_expect_count(&given, HILOCK_OK, hl_widen(10000));
    hl_join_within(turn.thread, &turn.done, hl_widen(10000));
    assert_status(turn.acquire_rc, HILOCK_OK);
    assert_status(turn.release_rc, HILOCK_OK);
    long turn_spins = spins_so_far() - before;
    printf("# a semaphore's caller taking turns: %ld spins\n", turn_spins);
    assert_int_equal(turn_spins, 0);
    hl_semaphore_destroy_any(sb);
    hl_semaphore_destroy_any(sa);
    hl_free_client(b);
    hl_free_client(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_an_idle_loop_sleeps, &fx),
        hl_lock_test(test_a_late_answer_is_awaited_asleep, &fx),
        hl_lock_test(test_a_queued_blocking_waiter_sleeps, &fx),
        hl_lock_test(test_a_caller_taking_turns_does_not_spin, &fx),
        hl_lock_test(test_a_semaphore_taking_turns_does_not_spin, &fx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
