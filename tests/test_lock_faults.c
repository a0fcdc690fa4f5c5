/* The reentrant lock when things break: a holder killed with SIGKILL, a
 * server stopped past the lease deadline, connections killed under a
 * waiter, a server restarted with an empty dataset under a waiter and
 * under a holder, and a server stopped for part of a bounded wait.  Each
 * fault is a real one, made to a real redis-server or a real process. */
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
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

/* ---- helpers ----------------------------------------------------------- */

/* Each test's server and forked children; see hl_lock_fixture. */
static hl_lock_fixture fx;

/* A thread that acquires, waiting as long as it takes, then releases. */
typedef struct waiter {
    pthread_t thread;
    hilock_lock *lock;
    int64_t wait_ms;
    int rc;
    int release_rc;
    int64_t acquired_at;
    int64_t count; /* the hold count the server had right after */
    char detail[256];
    bool release;
    atomic_bool done;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;

    w->rc = hilock_lock_try_acquire(w->lock, w->wait_ms,
                                    HILOCK_LEASE_WATCHDOG);
    w->acquired_at = hl_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s", hilock_last_error());
    if (w->rc == HILOCK_OK &&
        hilock_lock_hold_count(w->lock, &w->count) != HILOCK_OK)
        w->count = -1;
    if (w->rc == HILOCK_OK && w->release)
        w->release_rc = hilock_lock_release(w->lock);
    atomic_store(&w->done, true);
    return NULL;
}

static void waiter_start_for(waiter *w, hilock_lock *lock, int64_t wait_ms,
                             bool release)
{
    memset(w, 0, sizeof *w);
    w->lock = lock;
    w->wait_ms = wait_ms;
    w->release = release;
    w->rc = w->release_rc = -1;
    atomic_init(&w->done, false);
    assert_int_equal(pthread_create(&w->thread, NULL, waiter_main, w), 0);
}

static void waiter_start(waiter *w, hilock_lock *lock)
{
    waiter_start_for(w, lock, HILOCK_WAIT_FOREVER, true);
}

static void waiter_end(waiter *w, int timeout_ms)
{
    hl_join_within(w->thread, &w->done, timeout_ms);
}

static void waiter_join(waiter *w, int timeout_ms)
{
    waiter_end(w, timeout_ms);
    assert_status(w->rc, HILOCK_OK);
    assert_status(w->release_rc, HILOCK_OK);
}

/* ---- a holder killed with SIGKILL -------------------------------------- */

static void test_killed_holder(void **state)
{
    int ready[2];
    hilock_client *c;
    hilock_lock *l;
    int64_t t_kill, took;
    char byte;
    waiter w;

    (void)state;
    assert_int_equal(pipe(ready), 0);
    /* Fork first: the child must not inherit a client whose threads it
     * does not have. */
    if (hl_children_fork(&fx.kids, 0) == 0) {
        const hl_client_opts opts = { .watchdog_ms = 1000 };
        char why[300];
        hilock_client *hc;
        hilock_lock *hl = NULL;

        byte = 'h';
        close(ready[0]);
        hc = hl_open_client(fx.server, &opts, why, sizeof why);
        if (hc == NULL || hilock_lock_create(&hl, hc, "victim") != 0 ||
            hilock_lock_try_acquire(hl, 0, HILOCK_LEASE_WATCHDOG) != 0)
            _exit(1);
        if (write(ready[1], &byte, 1) != 1)
            _exit(1);
        /* Hold, with the watchdog renewing, until the parent kills us. */
        for (;;)
            pause();
    }
    close(ready[1]);
    if (!hl_read_exact(ready[0], &byte, 1, hl_widen(10000)))
        fail_msg("the child never reported holding the lock");
    close(ready[0]);
    c = hl_new_client(fx.server, NULL);
    l = hl_new_lock(c, "victim");
    waiter_start(&w, l);
    hl_expect_pending(c, l, 1);
    t_kill = hl_now_ms();
    assert_int_equal(hl_children_kill(&fx.kids, 0), 0);
    /* Nobody releases: the key has to expire, at most a watchdog timeout
     * after the dead holder's last renewal. */
    waiter_join(&w, hl_widen(10000));
    took = w.acquired_at - t_kill;
    if (took >= 3000)
        fail_msg("the lock of a killed holder was taken %lld ms after the "
                 "kill", (long long)took);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- the server stopped past the lease deadline ------------------------ */

static void test_server_paused_past_deadline(void **state)
{
    const hl_client_opts opts = { .watchdog_ms = 1000,
                                  .command_timeout_ms = 300 };
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *l = hl_new_lock(c, "paused");
    int pause_ms = hl_under_valgrind() ? 6000 : 2000;
    int64_t t_pause;
    bool lost = false;
    hl_lost_rec lr;

    (void)state;
    hl_lost_rec_init(&lr, NULL);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    hl_fixture_pause(fx.server);
    t_pause = hl_now_ms();
    /* No renewal can be confirmed now; the local deadline, at most a
     * watchdog timeout after the last confirmed one, must pass while the
     * server is still stopped. */
    if (!hl_wait_until(hl_lost_seen, &lr, pause_ms)) {
        hl_fixture_resume(fx.server);
        fail_msg("no lost callback within %d ms of stopping the server",
                 pause_ms);
    }
    assert_int_equal(atomic_load(&lr.owner), hilock_thread_owner());
    /* Keep the server stopped for the whole pause, so the key has
     * expired on the server too by the time it runs again; the stop is
     * the fault under test, not a guess at timing. */
    if (hl_now_ms() - t_pause < pause_ms)
        hl_sleep_ms((int)(pause_ms - (hl_now_ms() - t_pause)));
    hl_fixture_resume(fx.server);
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_true(lost);
    /* ELEASELOST, not ENOTOWNER: the client still knows of the hold it
     * lost, and lock.h promises that the next release after a reported
     * loss says so.  ENOTOWNER would tell the caller it never held the
     * lock, hiding that its critical section ran unprotected. */
    assert_status(hilock_lock_release(l), HILOCK_ELEASELOST);
    assert_int_equal(atomic_load(&lr.calls), 1);
    /* The client recovers: the lock can be taken again. */
    assert_status(hilock_lock_try_acquire(l, hl_widen(5000),
                                          HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    hl_free_lock(l);
    hl_free_client(c);
}

/* A release after a reported loss must not wait for a server that is
 * still stopped: the answer is known (ELEASELOST), and waiting would cost
 * the whole command timeout. */
static void test_release_after_loss_answers_at_once(void **state)
{
    const hl_client_opts opts = { .watchdog_ms = 1000,
                                  .command_timeout_ms = 5000 };
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *l = hl_new_lock(c, "lost-release");
    hl_lost_rec lr;
    int64_t t0;

    (void)state;
    hl_lost_rec_init(&lr, NULL);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    hl_fixture_pause(fx.server);
    if (!hl_wait_until(hl_lost_seen, &lr, hl_under_valgrind() ? 8000 : 3000)) {
        hl_fixture_resume(fx.server);
        fail_msg("no lost callback while the server was stopped");
    }
    t0 = hl_now_ms();
    int rc = hilock_lock_release(l);
    int64_t took = hl_now_ms() - t0;
    hl_fixture_resume(fx.server);
    assert_status(rc, HILOCK_ELEASELOST);
    /* Well inside the 5 s command timeout a round trip would have taken
     * with the server stopped. */
    assert_true(took < 2500);
    /* Nothing of the hold stands in anyone's way afterwards. */
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *lo = hl_new_lock(other, "lost-release");
    assert_status(hilock_lock_try_acquire(lo, hl_widen(5000), 10000),
                  HILOCK_OK);
    assert_status(hilock_lock_release(lo), HILOCK_OK);
    hl_free_lock(lo);
    hl_free_client(other);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- connections killed under a waiter --------------------------------- */

typedef enum kill_mode {
    KILL_PUBSUB_THEN_RELEASE,   /* the release message is likely lost */
    KILL_PUBSUB_RESUBSCRIBED,   /* released after the subscription is back */
    KILL_NORMAL                 /* command connections, holder's as well */
} kill_mode;

static void waiter_survives_kill(kill_mode mode)
{
    const char *channel = "redisson_lock__channel:{reconnect}";
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la = hl_new_lock(a, "reconnect");
    hilock_lock *lb = hl_new_lock(b, "reconnect");
    int64_t t_rel;
    waiter w;

    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    waiter_start(&w, lb);
    hl_expect_pending(b, lb, 1);
    hl_expect_numsub(fx.server, channel, 1, LLONG_MAX);
    if (mode == KILL_NORMAL) {
        /* Both clients' command connections: the holder's release and
         * the waiter's next attempt each wait for a reconnect. */
        assert_true(hl_fixture_client_kill(fx.server, "normal") >= 2);
    } else {
        assert_int_equal(hl_fixture_client_kill(fx.server, "pubsub"), 1);
        if (mode == KILL_PUBSUB_RESUBSCRIBED)
            hl_expect_numsub(fx.server, channel, 1, LLONG_MAX);
    }
    t_rel = hl_now_ms();
    assert_status(hilock_lock_release(la), HILOCK_OK);
    /* The holder's lease had 30 s left; a waiter that relied on it
     * running out would miss this bound by far. */
    waiter_join(&w, hl_widen(10000));
    if (w.acquired_at - t_rel >= 10000)
        fail_msg("acquired %lld ms after the release",
                 (long long)(w.acquired_at - t_rel));
    /* One hold, however it came: a grant the release made for the
     * waiter, its message lost, counts once when the waiter finds it. */
    assert_int_equal(w.count, 1);
    hl_free_lock(lb);
    hl_free_lock(la);
    hl_free_client(b);
    hl_free_client(a);
}

static void test_pubsub_killed_then_release(void **state)
{
    (void)state;
    waiter_survives_kill(KILL_PUBSUB_THEN_RELEASE);
}

static void test_pubsub_killed_resubscribed(void **state)
{
    (void)state;
    waiter_survives_kill(KILL_PUBSUB_RESUBSCRIBED);
}

static void test_normal_killed(void **state)
{
    (void)state;
    waiter_survives_kill(KILL_NORMAL);
}

/* ---- the server restarted under a waiter ------------------------------- */

static void test_restart_under_waiter(void **state)
{
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la = hl_new_lock(a, "restart");
    hilock_lock *lb = hl_new_lock(b, "restart");
    int64_t t_restart;
    waiter w;

    (void)state;
    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    waiter_start(&w, lb);
    hl_expect_pending(b, lb, 1);
    hl_expect_numsub(fx.server, "redisson_lock__channel:{restart}", 1,
                     LLONG_MAX);
    t_restart = hl_now_ms();
    hl_fixture_kill9(fx.server);
    hl_fixture_restart(fx.server);
    /* The lock went with the data; nobody will ever publish its release,
     * so the waiter has to try again once it is subscribed again. */
    waiter_join(&w, hl_widen(10000));
    if (w.acquired_at - t_restart >= 10000)
        fail_msg("acquired %lld ms after the restart",
                 (long long)(w.acquired_at - t_restart));
    /* The first holder's lease is gone with the data, and its release
     * has to say so. */
    assert_status(hilock_lock_release(la), HILOCK_ELEASELOST);
    hl_free_lock(lb);
    hl_free_lock(la);
    hl_free_client(b);
    hl_free_client(a);
}

/* ---- the server restarted under a holder ------------------------------- */

static void test_restart_under_holder(void **state)
{
    hilock_client *c =
        hl_new_client(fx.server, &(hl_client_opts){ .watchdog_ms = 1000 });
    hilock_lock *l = hl_new_lock(c, "amnesia");
    int64_t t_kill, took;
    bool lost = false;
    hl_lost_rec lr;

    (void)state;
    hl_lost_rec_init(&lr, NULL);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    t_kill = hl_now_ms();
    hl_fixture_kill9(fx.server);
    hl_fixture_restart(fx.server);
    /* The first renewal after the reconnect finds nothing, or the
     * deadline passes first; either way within the watchdog timeout of
     * the last renewal, plus the time a restart takes. */
    if (!hl_wait_until(hl_lost_seen, &lr, hl_widen(5000)))
        fail_msg("no lost callback within 5 s of the restart");
    took = atomic_load(&lr.at_ms) - t_kill;
    if (took >= 3000)
        fail_msg("the loss was reported %lld ms after the kill",
                 (long long)took);
    assert_int_equal(atomic_load(&lr.owner), hilock_thread_owner());
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_true(lost);
    assert_status(hilock_lock_release(l), HILOCK_ELEASELOST);
    assert_int_equal(atomic_load(&lr.calls), 1);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- a connection that comes back has its holds checked at once ------- */

/* Renewals 100 s apart and fixed leases as long: within any wait below,
 * even widened for valgrind, only the check on reconnecting can tell a
 * holder anything. */
#define SLOW_WATCHDOG_MS 300000

typedef struct stats_at_least {
    hilock_client *client;
    uint64_t renewed;
} stats_at_least;

static bool renewed_at_least(void *arg)
{
    stats_at_least *w = arg;
    hilock_client_stats st;

    return hl_client_counters(w->client, &st) == HILOCK_OK &&
           st.leases_renewed >= w->renewed;
}

static void test_restart_checks_holds_at_once(void **state)
{
    hilock_client *c = hl_new_client(
        fx.server, &(hl_client_opts){ .watchdog_ms = SLOW_WATCHDOG_MS });
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *w = hl_new_lock(c, "amnesia:watched");
    hilock_lock *f = hl_new_lock(c, "amnesia:fixed");
    hilock_lock *ow = hl_new_lock(other, "amnesia:watched");
    static hl_lost_rec lw, lf;
    bool lost = false;

    (void)state;
    hl_lost_rec_init(&lw, c);
    hl_lost_rec_init(&lf, c);
    assert_status(hilock_lock_set_lost_callback(w, hl_record_lost, &lw),
                  HILOCK_OK);
    assert_status(hilock_lock_set_lost_callback(f, hl_record_lost, &lf),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(w, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(f, 0, SLOW_WATCHDOG_MS),
                  HILOCK_OK);
    hl_fixture_kill9(fx.server);
    hl_fixture_restart(fx.server);
    /* The data went with the process: another client gets the lock the
     * moment it reconnects, so the holder must hear of its loss just as
     * soon. */
    assert_status(hilock_lock_try_acquire(ow, hl_widen(10000),
                                          HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    if (!hl_wait_until(hl_lost_seen, &lw, hl_widen(5000)))
        fail_msg("the watchdog hold was not reported lost within 5 s of "
                 "the server coming back empty");
    if (!hl_wait_until(hl_lost_seen, &lf, hl_widen(5000)))
        fail_msg("the fixed-lease hold was not reported lost within 5 s "
                 "of the server coming back empty");
    assert_int_equal(atomic_load(&lw.off_loop), 0);
    assert_int_equal(atomic_load(&lf.owner), hilock_thread_owner());
    assert_status(hilock_lock_lease_lost(w, &lost), HILOCK_OK);
    assert_true(lost);
    assert_status(hilock_lock_release(w), HILOCK_ELEASELOST);
    assert_status(hilock_lock_release(f), HILOCK_ELEASELOST);
    assert_status(hilock_lock_release(ow), HILOCK_OK);
    assert_int_equal(atomic_load(&lw.calls), 1);
    assert_int_equal(atomic_load(&lf.calls), 1);
    hl_free_lock(ow);
    hl_free_lock(f);
    hl_free_lock(w);
    hl_free_client(other);
    hl_free_client(c);
}

static void test_reconnect_keeps_surviving_holds(void **state)
{
    hilock_client *c = hl_new_client(
        fx.server, &(hl_client_opts){ .watchdog_ms = SLOW_WATCHDOG_MS });
    hilock_lock *w = hl_new_lock(c, "kept:watched");
    hilock_lock *f = hl_new_lock(c, "kept:fixed");
    static hl_lost_rec lw, lf;
    stats_at_least checked = { c, 1 };
    hilock_client_stats st;
    bool flag = true;

    (void)state;
    hl_lost_rec_init(&lw, c);
    hl_lost_rec_init(&lf, c);
    assert_status(hilock_lock_set_lost_callback(w, hl_record_lost, &lw),
                  HILOCK_OK);
    assert_status(hilock_lock_set_lost_callback(f, hl_record_lost, &lf),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(w, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(f, 0, SLOW_WATCHDOG_MS),
                  HILOCK_OK);
    assert_status(hl_client_counters(c, &st), HILOCK_OK);
    assert_int_equal(st.leases_renewed, 0);
    assert_true(hl_fixture_client_kill(fx.server, "normal") >= 1);
    /* The watchdog hold is confirmed by the check after the reconnect;
     * the fixed one's check went out behind it on the same connection,
     * so a round trip after that has its answer in too. */
    if (!hl_wait_until(renewed_at_least, &checked, hl_widen(5000)))
        fail_msg("the holds were not checked within 5 s of the reconnect");
    assert_status(hilock_lock_is_locked(f, &flag), HILOCK_OK);
    assert_true(flag);
    assert_status(hl_client_counters(c, &st), HILOCK_OK);
    assert_int_equal(st.leases_lost, 0);
    assert_int_equal(st.leases_active, 2);
    assert_status(hilock_lock_lease_lost(w, &flag), HILOCK_OK);
    assert_false(flag);
    assert_status(hilock_lock_lease_lost(f, &flag), HILOCK_OK);
    assert_false(flag);
    assert_int_equal(atomic_load(&lw.calls), 0);
    assert_int_equal(atomic_load(&lf.calls), 0);
    assert_status(hilock_lock_release(w), HILOCK_OK);
    assert_status(hilock_lock_release(f), HILOCK_OK);
    hl_free_lock(f);
    hl_free_lock(w);
    hl_free_client(c);
}

/* ---- a short outage during a bounded wait ------------------------------ */

static void test_outage_during_wait(void **state)
{
    const hl_client_opts opts = { .command_timeout_ms = 300 };
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_client *obs = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "outage");
    hilock_lock *lo = hl_new_lock(obs, "outage");
    const int64_t wait_ms = 3000;
    int64_t t0;
    bool locked = true;
    waiter w;

    (void)state;
    hl_fixture_pause(fx.server);
    t0 = hl_now_ms();
    waiter_start_for(&w, l, wait_ms, true);
    /* The first attempt times out and resets the connection; the server
     * comes back well inside the wait, with the lock free. */
    hl_sleep_ms(800);
    hl_fixture_resume(fx.server);
    waiter_end(&w, hl_widen(15000));
    if (w.rc != HILOCK_OK) {
        int64_t ttl = 0;

        /* Say whether the attempt lost with the first connection left a
         * hold behind that nobody will release. */
        assert_status(hilock_lock_is_locked(lo, &locked), HILOCK_OK);
        assert_status(hilock_lock_remaining_ttl(lo, &ttl), HILOCK_OK);
        fail_msg("acquire across an 800 ms outage with a %lld ms wait: %s "
                 "(%s) after %lld ms; the lock is %s (ttl %lld ms)",
                 (long long)wait_ms, hilock_errname(w.rc), w.detail,
                 (long long)(w.acquired_at - t0),
                 locked ? "held" : "free", (long long)ttl);
    }
    if (w.acquired_at - t0 > wait_ms + hl_widen(1000))
        fail_msg("acquired %lld ms after the start of a %lld ms wait",
                 (long long)(w.acquired_at - t0), (long long)wait_ms);
    /* One hold, as the server sees it too: the attempt lost with the
     * first connection must not have left a hold of its own, so the one
     * release frees the lock. */
    assert_int_equal(w.count, 1);
    assert_status(w.release_rc, HILOCK_OK);
    assert_status(hilock_lock_is_locked(lo, &locked), HILOCK_OK);
    /* The timed-out attempt was voided on the server, so that it refuses
     * to run should it still arrive there. */
    {
        const char *argv[] = {"SCARD", "hilock_void:{outage}"};
        hilock_reply *r = NULL;
        assert_status(hilock_client_command(obs, 2, argv, NULL, &r),
                      HILOCK_OK);
        assert_true(r->type == HILOCK_REPLY_INTEGER && r->integer >= 1);
        hilock_reply_free(r);
    }
    assert_false(locked);
    hl_free_lock(lo);
    hl_free_lock(l);
    hl_free_client(obs);
    hl_free_client(c);
}

/* An owner's lost lease read from a thread other than the loop's: the
 * old call can only say false there, which reads as "not lost"; the one
 * with a status says what it is. */
static void test_owner_lost_read_off_the_loop_thread(void **state)
{
    const hl_client_opts opts = { .watchdog_ms = 1000,
                                  .command_timeout_ms = 5000 };
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *l = hl_new_lock(c, "owner-lost-off-loop");
    static hl_acquire_rec got;
    static hl_lost_rec lr;
    bool lost = true;

    (void)state;
    hl_lost_rec_init(&lr, c);
    assert_status(hilock_lock_set_lost_callback(l, hl_record_lost, &lr),
                  HILOCK_OK);
    hl_acquire_rec_init(&got, c);
    assert_status(hilock_lock_acquire_async(l, 5, 0, HILOCK_LEASE_WATCHDOG,
                                            0, hl_record_acquire, &got,
                                            NULL),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&got), HILOCK_OK);
    assert_status(hilock_lock_owner_lost_get(l, 5, &lost), HILOCK_OK);
    assert_false(lost);
    hl_fixture_pause(fx.server);
    bool seen = hl_wait_until(hl_lost_seen, &lr, hl_widen(3000));
    hl_fixture_resume(fx.server);
    if (!seen)
        fail_msg("no lost callback while the server was stopped");
    assert_status(hilock_lock_owner_lost_get(l, 5, &lost), HILOCK_OK);
    assert_true(lost);
    assert_false(hilock_lock_owner_lost(l, 5));
    assert_status(hilock_lock_owner_lost_get(l, 6, &lost), HILOCK_OK);
    assert_false(lost);
    assert_status(hilock_lock_owner_lost_get(l, 0, &lost), HILOCK_EINVAL);
    hl_free_lock(l);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_killed_holder),
        T(test_server_paused_past_deadline),
        T(test_release_after_loss_answers_at_once),
        T(test_pubsub_killed_then_release),
        T(test_pubsub_killed_resubscribed),
        T(test_normal_killed),
        T(test_restart_under_waiter),
        T(test_restart_under_holder),
        T(test_restart_checks_holds_at_once),
        T(test_reconnect_keeps_surviving_holds),
        T(test_outage_during_wait),
        T(test_owner_lost_read_off_the_loop_thread),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
