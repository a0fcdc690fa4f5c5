/* The reentrant lock when things break: a holder killed with SIGKILL, a
 * server stopped past the lease deadline, connections killed under a
 * waiter, a server restarted with an empty dataset under a waiter and
 * under a holder, and a server stopped for part of a bounded wait.  Each
 * fault is a real one, made to a real redis-server or a real process. */
/* ctest-timeout: 120 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/client_internal.h"
#include "core/lockobj_internal.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/options.h"
#include "hilock/reply.h"
#include "support/fixture.h"

/* ---- helpers ----------------------------------------------------------- */

static hl_redis_server *server;
/* A forked holder still alive when its test fails is killed here. */
static pid_t child_pid;

static bool under_valgrind(void)
{
    return getenv("HILOCK_TEST_UNDER_VALGRIND") != NULL;
}

/* Valgrind runs the library tens of times slower, so bounds that catch a
 * hang on a normal build would catch mere slowness there. */
static int widen(int ms)
{
    return under_valgrind() ? ms * 10 : ms;
}

static int setup_server(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    return 0;
}

static int teardown_server(void **state)
{
    (void)state;
    if (child_pid > 0) {
        kill(child_pid, SIGKILL);
        waitpid(child_pid, NULL, 0);
        child_pid = 0;
    }
    hl_redis_server_stop(server);
    server = NULL;
    return 0;
}

#define assert_status(actual, expected)                                    \
    do {                                                                   \
        int a_ = (actual), e_ = (expected);                                \
        if (a_ != e_)                                                      \
            fail_msg("%s returned %s (%s), expected %s", #actual,          \
                     hilock_errname(a_), hilock_last_error(),              \
                     hilock_errname(e_));                                  \
    } while (0)

/* No cmocka here: a forked child makes its client with it.  0 keeps a
 * default. */
static hilock_client *make_client(int64_t watchdog_ms,
                                  int64_t command_timeout_ms, char *why,
                                  size_t cap)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    int rc = hilock_options_create(&o);

    if (rc == HILOCK_OK)
        rc = hilock_options_set_host(o, "127.0.0.1");
    if (rc == HILOCK_OK)
        rc = hilock_options_set_port(o, hl_redis_server_port(server));
    /* Short backoff: every test here breaks connections, and a client
     * that waits seconds to come back would only slow them down. */
    if (rc == HILOCK_OK)
        rc = hilock_options_set_reconnect_backoff_ms(o, 20, 200);
    if (rc == HILOCK_OK && watchdog_ms > 0)
        rc = hilock_options_set_watchdog_timeout_ms(o, watchdog_ms);
    if (rc == HILOCK_OK && under_valgrind())
        rc = hilock_options_set_connect_timeout_ms(o, 20000);
    if (rc == HILOCK_OK && command_timeout_ms > 0)
        rc = hilock_options_set_command_timeout_ms(o, command_timeout_ms);
    else if (rc == HILOCK_OK && under_valgrind())
        rc = hilock_options_set_command_timeout_ms(o, 20000);
    if (rc == HILOCK_OK)
        rc = hilock_client_create(&c, o);
    if (rc != HILOCK_OK)
        snprintf(why, cap, "%s: %s", hilock_errname(rc),
                 hilock_last_error());
    hilock_options_free(o);
    return c;
}

static hilock_client *client_with(int64_t watchdog_ms,
                                  int64_t command_timeout_ms)
{
    char why[300];
    hilock_client *c = make_client(watchdog_ms, command_timeout_ms, why,
                                   sizeof why);

    if (c == NULL)
        fail_msg("client: %s", why);
    return c;
}

static hilock_client *client_new(void)
{
    return client_with(0, 0);
}

static void client_free(hilock_client *c)
{
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
}

static hilock_lock *lock_new(hilock_client *c, const char *name)
{
    hilock_lock *l = NULL;

    assert_status(hilock_lock_create(&l, c, name, strlen(name)), HILOCK_OK);
    return l;
}

static void lock_free(hilock_lock *l)
{
    assert_int_equal(hilock_lock_destroy(l), HILOCK_OK);
}

typedef void loop_fn(hilock_client *c, void *arg);

typedef struct loop_call {
    hl_task task;
    loop_fn *fn;
    void *arg;
    atomic_bool done;
    bool closed;
} loop_call;

static void loop_call_run(hilock_client *c, hl_task *t, bool closed)
{
    loop_call *lc = (loop_call *)t;

    lc->closed = closed;
    if (!closed)
        lc->fn(c, lc->arg);
    atomic_store(&lc->done, true);
}

/* Runs fn on the client's loop thread and waits until it has run. */
static void on_loop(hilock_client *c, loop_fn *fn, void *arg)
{
    loop_call lc;

    memset(&lc, 0, sizeof lc);
    lc.task.run = loop_call_run;
    lc.fn = fn;
    lc.arg = arg;
    atomic_init(&lc.done, false);
    assert_int_equal(hl_client_submit(c, &lc.task), HILOCK_OK);
    /* Leaving early would leave the queued task dangling. */
    if (!hl_wait_flag(&lc.done, widen(30000)))
        fail_msg("the loop thread did not run a task within 30 s");
    assert_false(lc.closed);
}

typedef struct pending {
    hilock_lock *lock;
    int ops;
    int subscribed;
} pending;

static void read_pending(hilock_client *c, void *arg)
{
    pending *p = arg;

    (void)c;
    p->ops = p->subscribed = 0;
    for (hl_acquire_op *op = p->lock->ops; op != NULL; op = op->next) {
        p->ops++;
        if (op->subscribed && op->waiter.chan != NULL)
            p->subscribed++;
    }
}

typedef struct pending_want {
    hilock_client *client;
    hilock_lock *lock;
    int ops;
} pending_want;

static bool pending_reached(void *arg)
{
    pending_want *w = arg;
    pending p = { .lock = w->lock };

    on_loop(w->client, read_pending, &p);
    return p.ops == w->ops && p.subscribed == w->ops;
}

/* Waits until n acquires of lock are pending, each on the channel. */
static void wait_pending(hilock_client *c, hilock_lock *lock, int n)
{
    pending_want w = { c, lock, n };

    if (!hl_wait_until(pending_reached, &w, widen(10000)))
        fail_msg("the acquire never started waiting");
}

typedef struct numsub_want {
    const char *channel;
    long long min;
} numsub_want;

static bool numsub_reached(void *arg)
{
    numsub_want *w = arg;

    return hl_fixture_numsub(server, w->channel) >= w->min;
}

static void wait_numsub(const char *channel, long long min)
{
    numsub_want w = { channel, min };

    if (!hl_wait_until(numsub_reached, &w, widen(10000)))
        fail_msg("PUBSUB NUMSUB %s stayed below %lld", channel, min);
}

typedef struct lost_rec {
    atomic_int calls;
    _Atomic uint64_t owner;
    _Atomic int64_t at_ms;
} lost_rec;

static void lost_rec_init(lost_rec *r)
{
    atomic_init(&r->calls, 0);
    atomic_init(&r->owner, 0);
    atomic_init(&r->at_ms, 0);
}

static void on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    lost_rec *r = data;

    (void)lock;
    atomic_store(&r->owner, owner);
    atomic_store(&r->at_ms, hl_now_ms());
    atomic_fetch_add(&r->calls, 1);
}

static bool lost_seen(void *arg)
{
    return atomic_load(&((lost_rec *)arg)->calls) > 0;
}

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
    if (!hl_wait_flag(&w->done, timeout_ms)) {
        pthread_detach(w->thread);
        fail_msg("the waiter did not finish within %d ms", timeout_ms);
    }
    pthread_join(w->thread, NULL);
}

static void waiter_join(waiter *w, int timeout_ms)
{
    waiter_end(w, timeout_ms);
    assert_status(w->rc, HILOCK_OK);
    assert_status(w->release_rc, HILOCK_OK);
}

/* ---- a holder killed with SIGKILL -------------------------------------- */

static bool read_byte(int fd, int timeout_ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char byte;

    return poll(&p, 1, timeout_ms) == 1 && read(fd, &byte, 1) == 1;
}

static void test_killed_holder(void **state)
{
    int ready[2];
    hilock_client *c;
    hilock_lock *l;
    int64_t t_kill, took;
    pid_t pid;
    waiter w;

    (void)state;
    assert_int_equal(pipe(ready), 0);
    /* Fork first: the child must not inherit a client whose threads it
     * does not have. */
    pid = fork();
    assert_true(pid >= 0);
    if (pid > 0)
        child_pid = pid;
    if (pid == 0) {
        char why[300], byte = 'h';
        hilock_client *hc;
        hilock_lock *hl = NULL;

        close(ready[0]);
        hc = make_client(1000, 0, why, sizeof why);
        if (hc == NULL || hilock_lock_create(&hl, hc, "victim", 6) != 0 ||
            hilock_lock_try_acquire(hl, 0, HILOCK_LEASE_WATCHDOG) != 0)
            _exit(1);
        if (write(ready[1], &byte, 1) != 1)
            _exit(1);
        /* Hold, with the watchdog renewing, until the parent kills us. */
        for (;;)
            pause();
    }
    close(ready[1]);
    if (!read_byte(ready[0], widen(10000)))
        fail_msg("the child never reported holding the lock");
    close(ready[0]);
    c = client_new();
    l = lock_new(c, "victim");
    waiter_start(&w, l);
    wait_pending(c, l, 1);
    t_kill = hl_now_ms();
    assert_int_equal(kill(pid, SIGKILL), 0);
    waitpid(pid, NULL, 0);
    child_pid = 0;
    /* Nobody releases: the key has to expire, at most a watchdog timeout
     * after the dead holder's last renewal. */
    waiter_join(&w, widen(10000));
    took = w.acquired_at - t_kill;
    if (took >= 3000)
        fail_msg("the lock of a killed holder was taken %lld ms after the "
                 "kill", (long long)took);
    lock_free(l);
    client_free(c);
}

/* ---- the server stopped past the lease deadline ------------------------ */

static void test_server_paused_past_deadline(void **state)
{
    hilock_client *c = client_with(1000, 300);
    hilock_lock *l = lock_new(c, "paused");
    int pause_ms = under_valgrind() ? 6000 : 2000;
    int64_t t_pause;
    bool lost = false;
    lost_rec lr;

    (void)state;
    lost_rec_init(&lr);
    assert_status(hilock_lock_set_lost_callback(l, on_lost, &lr), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    hl_fixture_pause(server);
    t_pause = hl_now_ms();
    /* No renewal can be confirmed now; the local deadline, at most a
     * watchdog timeout after the last confirmed one, must pass while the
     * server is still stopped. */
    if (!hl_wait_until(lost_seen, &lr, pause_ms)) {
        hl_fixture_resume(server);
        fail_msg("no lost callback within %d ms of stopping the server",
                 pause_ms);
    }
    assert_int_equal(atomic_load(&lr.owner), hilock_thread_owner());
    /* Keep the server stopped for the whole pause, so the key has
     * expired on the server too by the time it runs again; the stop is
     * the fault under test, not a guess at timing. */
    if (hl_now_ms() - t_pause < pause_ms)
        hl_sleep_ms((int)(pause_ms - (hl_now_ms() - t_pause)));
    hl_fixture_resume(server);
    assert_status(hilock_lock_lease_lost(l, &lost), HILOCK_OK);
    assert_true(lost);
    /* ELEASELOST, not ENOTOWNER: the client still knows of the hold it
     * lost, and lock.h promises that the next release after a reported
     * loss says so.  ENOTOWNER would tell the caller it never held the
     * lock, hiding that its critical section ran unprotected. */
    assert_status(hilock_lock_release(l), HILOCK_ELEASELOST);
    assert_int_equal(atomic_load(&lr.calls), 1);
    /* The client recovers: the lock can be taken again. */
    assert_status(hilock_lock_try_acquire(l, widen(5000),
                                          HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    lock_free(l);
    client_free(c);
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
    hilock_client *a = client_new(), *b = client_new();
    hilock_lock *la = lock_new(a, "reconnect"), *lb = lock_new(b, "reconnect");
    int64_t t_rel;
    waiter w;

    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    waiter_start(&w, lb);
    wait_pending(b, lb, 1);
    wait_numsub(channel, 1);
    if (mode == KILL_NORMAL) {
        /* Both clients' command connections: the holder's release and
         * the waiter's next attempt each wait for a reconnect. */
        assert_true(hl_fixture_client_kill(server, "normal") >= 2);
    } else {
        assert_int_equal(hl_fixture_client_kill(server, "pubsub"), 1);
        if (mode == KILL_PUBSUB_RESUBSCRIBED)
            wait_numsub(channel, 1);
    }
    t_rel = hl_now_ms();
    assert_status(hilock_lock_release(la), HILOCK_OK);
    /* The holder's lease had 30 s left; a waiter that relied on it
     * running out would miss this bound by far. */
    waiter_join(&w, widen(10000));
    if (w.acquired_at - t_rel >= 10000)
        fail_msg("acquired %lld ms after the release",
                 (long long)(w.acquired_at - t_rel));
    lock_free(lb);
    lock_free(la);
    client_free(b);
    client_free(a);
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
    hilock_client *a = client_new(), *b = client_new();
    hilock_lock *la = lock_new(a, "restart"), *lb = lock_new(b, "restart");
    int64_t t_restart;
    waiter w;

    (void)state;
    assert_status(hilock_lock_try_acquire(la, 0, 30000), HILOCK_OK);
    waiter_start(&w, lb);
    wait_pending(b, lb, 1);
    wait_numsub("redisson_lock__channel:{restart}", 1);
    t_restart = hl_now_ms();
    hl_fixture_kill9(server);
    hl_fixture_restart(server);
    /* The lock went with the data; nobody will ever publish its release,
     * so the waiter has to try again once it is subscribed again. */
    waiter_join(&w, widen(10000));
    if (w.acquired_at - t_restart >= 10000)
        fail_msg("acquired %lld ms after the restart",
                 (long long)(w.acquired_at - t_restart));
    /* The first holder's lease is gone with the data, and its release
     * has to say so. */
    assert_status(hilock_lock_release(la), HILOCK_ELEASELOST);
    lock_free(lb);
    lock_free(la);
    client_free(b);
    client_free(a);
}

/* ---- the server restarted under a holder ------------------------------- */

static void test_restart_under_holder(void **state)
{
    hilock_client *c = client_with(1000, 0);
    hilock_lock *l = lock_new(c, "amnesia");
    int64_t t_kill, took;
    bool lost = false;
    lost_rec lr;

    (void)state;
    lost_rec_init(&lr);
    assert_status(hilock_lock_set_lost_callback(l, on_lost, &lr), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(l, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    t_kill = hl_now_ms();
    hl_fixture_kill9(server);
    hl_fixture_restart(server);
    /* The first renewal after the reconnect finds nothing, or the
     * deadline passes first; either way within the watchdog timeout of
     * the last renewal, plus the time a restart takes. */
    if (!hl_wait_until(lost_seen, &lr, widen(5000)))
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
    lock_free(l);
    client_free(c);
}

/* ---- a short outage during a bounded wait ------------------------------ */

static void test_outage_during_wait(void **state)
{
    hilock_client *c = client_with(0, 300), *obs = client_new();
    hilock_lock *l = lock_new(c, "outage"), *lo = lock_new(obs, "outage");
    const int64_t wait_ms = 3000;
    int64_t t0;
    bool locked = true;
    waiter w;

    (void)state;
    hl_fixture_pause(server);
    t0 = hl_now_ms();
    waiter_start_for(&w, l, wait_ms, true);
    /* The first attempt times out and resets the connection; the server
     * comes back well inside the wait, with the lock free. */
    hl_sleep_ms(800);
    hl_fixture_resume(server);
    waiter_end(&w, widen(15000));
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
    if (w.acquired_at - t0 > wait_ms + widen(1000))
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
    lock_free(lo);
    lock_free(l);
    client_free(obs);
    client_free(c);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup_server, teardown_server)
    const struct CMUnitTest tests[] = {
        T(test_killed_holder),
        T(test_server_paused_past_deadline),
        T(test_pubsub_killed_then_release),
        T(test_pubsub_killed_resubscribed),
        T(test_normal_killed),
        T(test_restart_under_waiter),
        T(test_restart_under_holder),
        T(test_outage_during_wait),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
