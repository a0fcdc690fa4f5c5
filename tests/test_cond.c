/* hilock_cond on a real redis-server: a wait releases the lock and comes
 * back holding it once signalled; signal wakes one waiter, broadcast all;
 * a signal whose message is lost still reaches its waiter; a waiter that
 * times out, is cancelled or dies passes a signal it took on; and what a
 * wait refuses. */
/* ctest-timeout: 240 */
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "redis_server.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

/* The outcome of an async wait. */
typedef struct wait_outcome {
    atomic_int done;
    atomic_int status;
    hilock_lock *lock;
    uint64_t owner;
    bool release; /* give the lock back at once, from the callback */
} wait_outcome;

static void on_released(hilock_lock *lock, int status, int64_t value,
                        void *data)
{
    (void)lock, (void)status, (void)value, (void)data;
}

static void on_waited(hilock_cond *cond, int status, uint64_t token,
                      void *data)
{
    (void)cond, (void)token;
    wait_outcome *o = data;
    atomic_store(&o->status, status);
    if (status == HILOCK_OK && o->release)
        assert_int_equal(hilock_lock_release_async(o->lock, o->owner,
                                                   on_released, NULL),
                         HILOCK_OK);
    atomic_store(&o->done, 1);
}

static long long server_int(const char *cmd, const char *key)
{
    return hl_raw_int(fx.server, cmd, key, (char *)NULL);
}

typedef struct int_probe {
    const char *cmd;
    const char *key;
    long long want;
} int_probe;

static bool int_is(void *arg)
{
    int_probe *p = arg;
    return server_int(p->cmd, p->key) == p->want;
}

static void expect_int(const char *cmd, const char *key, long long want)
{
    int_probe p = {cmd, key, want};
    if (!hl_wait_until(int_is, &p, hl_widen(10000)))
        fail_msg("%s %s stayed %lld, not %lld", cmd, key,
                 server_int(cmd, key), want);
}

/* Hold lock as owner and start waiting on cond; returns once the wait is
 * in line and the lock free. */
static void start_wait(hilock_lock *lock, hilock_cond *cond, uint64_t owner,
                       int64_t timeout_ms, wait_outcome *o,
                       const char *line, long long in_line)
{
    assert_status(hilock_lock_acquire_as(lock, owner, HILOCK_WAIT_FOREVER,
                                         HILOCK_LEASE_WATCHDOG, 0, NULL),
                  HILOCK_OK);
    o->lock = lock;
    o->owner = owner;
    assert_status(hilock_cond_wait_async(cond, owner, timeout_ms, on_waited,
                                         o, NULL),
                  HILOCK_OK);
    expect_int("LLEN", line, in_line);
}

/* One waiter, one signal: the lock is free while it waits, and its own
 * again when the wait returns. */
static void test_wait_then_signal(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(a, "cv-a");
    hilock_lock *other = hl_new_lock(b, "cv-a");
    hilock_cond *ready, *ready_b;
    assert_status(hilock_cond_create(&ready, lock, "ready"), HILOCK_OK);
    assert_status(hilock_cond_create(&ready_b, other, "ready"), HILOCK_OK);
    wait_outcome o = {0};

    start_wait(lock, ready, 5, HILOCK_WAIT_FOREVER, &o,
               "hilock_cond_line:{cv-a}:ready", 1);
    assert_int_equal(server_int("EXISTS", "cv-a"), 0);
    /* The lock is free to others meanwhile. */
    assert_status(hilock_lock_try_acquire(other, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    int64_t woken = -1;
    assert_status(hilock_cond_signal(ready_b, &woken), HILOCK_OK);
    assert_int_equal(woken, 1);
    /* Woken, it waits for the lock, which b still holds. */
    assert_int_equal(atomic_load(&o.done), 0);
    assert_status(hilock_lock_release(other), HILOCK_OK);
    hl_expect_count(&o.done, 1, hl_widen(10000));
    assert_int_equal(atomic_load(&o.status), HILOCK_OK);
    char field[64];
    snprintf(field, sizeof field, "%s:5", hilock_client_id(a));
    assert_int_equal(hl_raw_int(fx.server, "HEXISTS", "cv-a", field,
                                (char *)NULL),
                     1);
    assert_int_equal(server_int("LLEN", "hilock_cond_line:{cv-a}:ready"), 0);
    assert_status(hilock_lock_release_as(lock, 5), HILOCK_OK);
    /* Nobody waits: a signal wakes nobody, and is not kept. */
    assert_status(hilock_cond_signal(ready_b, &woken), HILOCK_OK);
    assert_int_equal(woken, 0);

    hilock_cond_destroy(ready);
    hilock_cond_destroy(ready_b);
    hl_free_lock(lock);
    hl_free_lock(other);
    hl_free_client(a);
    hl_free_client(b);
}

/* Signal wakes the longest waiting; broadcast wakes the rest. */
static void test_signal_one_broadcast_all(void **state)
{
    (void)state;
    enum { N = 3 };
    hilock_client *c[N], *s = hl_new_client(fx.server, NULL);
    hilock_lock *l[N], *sl = hl_new_lock(s, "cv-b");
    hilock_cond *cv[N], *scv;
    wait_outcome o[N];
    memset(o, 0, sizeof o);
    assert_status(hilock_cond_create(&scv, sl, "items"), HILOCK_OK);
    for (int i = 0; i < N; i++) {
        c[i] = hl_new_client(fx.server, NULL);
        l[i] = hl_new_lock(c[i], "cv-b");
        assert_status(hilock_cond_create(&cv[i], l[i], "items"), HILOCK_OK);
        o[i].release = true;
        start_wait(l[i], cv[i], 100 + (uint64_t)i, HILOCK_WAIT_FOREVER,
                   &o[i], "hilock_cond_line:{cv-b}:items", i + 1);
    }
    int64_t woken = 0;
    assert_status(hilock_cond_signal(scv, &woken), HILOCK_OK);
    assert_int_equal(woken, 1);
    hl_expect_count(&o[0].done, 1, hl_widen(10000));
    assert_int_equal(atomic_load(&o[0].status), HILOCK_OK);
    assert_int_equal(atomic_load(&o[1].done), 0);
    assert_int_equal(atomic_load(&o[2].done), 0);
    assert_status(hilock_cond_broadcast(scv, &woken), HILOCK_OK);
    assert_int_equal(woken, 2);
    for (int i = 1; i < N; i++) {
        hl_expect_count(&o[i].done, 1, hl_widen(10000));
        assert_int_equal(atomic_load(&o[i].status), HILOCK_OK);
    }
    expect_int("EXISTS", "cv-b", 0);
    for (int i = 0; i < N; i++) {
        hilock_cond_destroy(cv[i]);
        hl_free_lock(l[i]);
        hl_free_client(c[i]);
    }
    hilock_cond_destroy(scv);
    hl_free_lock(sl);
    hl_free_client(s);
}

/* The waiter's pub/sub connection is killed after it entered the line,
 * and stays away for seconds, so the signal's message reaches nobody:
 * the record the signal left still wakes the waiter, at its next look
 * over its command connection. */
static void test_signal_with_its_message_lost(void **state)
{
    (void)state;
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(fx.server));
    hilock_options *o;
    hilock_client *a;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_options_set_waiter_timeout_ms(o, 1500), HILOCK_OK);
    assert_status(hilock_options_set_reconnect_backoff_ms(o, 30000, 30000),
                  HILOCK_OK);
    assert_status(hilock_client_create(&a, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(a, "cv-c");
    hilock_lock *other = hl_new_lock(b, "cv-c");
    hilock_cond *cv, *cvb;
    assert_status(hilock_cond_create(&cv, lock, "c"), HILOCK_OK);
    assert_status(hilock_cond_create(&cvb, other, "c"), HILOCK_OK);
    wait_outcome ow = {0};
    char channel[128];
    snprintf(channel, sizeof channel, "hilock_cond_wake:{cv-c}:c:%s",
             hilock_client_id(a));

    start_wait(lock, cv, 7, HILOCK_WAIT_FOREVER, &ow,
               "hilock_cond_line:{cv-c}:c", 1);
    hl_expect_numsub(fx.server, channel, 1, 1);
    assert_true(hl_fixture_client_kill(fx.server, "pubsub") >= 1);
    hl_expect_numsub(fx.server, channel, 0, 0);
    int64_t woken = 0;
    assert_status(hilock_cond_signal(cvb, &woken), HILOCK_OK);
    assert_int_equal(woken, 1);
    /* Its looks come every half second; its pub/sub is back only in
     * 30 s. */
    hl_expect_count(&ow.done, 1, hl_widen(10000));
    assert_int_equal(hl_fixture_numsub(fx.server, channel), 0);
    assert_int_equal(atomic_load(&ow.status), HILOCK_OK);
    assert_status(hilock_lock_release_as(lock, 7), HILOCK_OK);

    hilock_cond_destroy(cv);
    hilock_cond_destroy(cvb);
    hl_free_lock(lock);
    hl_free_lock(other);
    hl_free_client(a);
    hl_free_client(b);
}

/* No signal: the wait ends with ETIMEDOUT, the lock not held, the line
 * empty.  A cancelled wait ends alike. */
static void test_timeout_and_cancel(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(a, "cv-d");
    hilock_cond *cv;
    assert_status(hilock_cond_create(&cv, lock, "d"), HILOCK_OK);

    assert_status(hilock_lock_acquire(lock), HILOCK_OK);
    assert_status(hilock_cond_wait(cv, 300), HILOCK_ETIMEDOUT);
    assert_non_null(strstr(hilock_last_error(), "not held"));
    assert_int_equal(server_int("EXISTS", "cv-d"), 0);
    assert_int_equal(server_int("LLEN", "hilock_cond_line:{cv-d}:d"), 0);
    bool held = true;
    assert_status(hilock_lock_is_held_by_me(lock, &held), HILOCK_OK);
    assert_false(held);

    wait_outcome o = {0};
    assert_status(hilock_lock_acquire_as(lock, 9, 0, HILOCK_LEASE_WATCHDOG,
                                         0, NULL),
                  HILOCK_OK);
    uint64_t op = 0;
    assert_status(hilock_cond_wait_async(cv, 9, HILOCK_WAIT_FOREVER,
                                         on_waited, &o, &op),
                  HILOCK_OK);
    expect_int("LLEN", "hilock_cond_line:{cv-d}:d", 1);
    assert_status(hilock_cond_cancel(cv, op), HILOCK_OK);
    hl_expect_count(&o.done, 1, hl_widen(10000));
    assert_int_equal(atomic_load(&o.status), HILOCK_ECANCELED);
    expect_int("LLEN", "hilock_cond_line:{cv-d}:d", 0);
    assert_int_equal(server_int("EXISTS", "cv-d"), 0);
    assert_status(hilock_cond_cancel(cv, op), HILOCK_ENOTFOUND);

    hilock_cond_destroy(cv);
    hl_free_lock(lock);
    hl_free_client(a);
}

/* A signal taken by a waiter that then times out before it takes the
 * lock again passes on to the next waiter. */
static void test_a_timed_out_waiter_passes_its_signal_on(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_lock *la = hl_new_lock(a, "cv-e"), *lb = hl_new_lock(b, "cv-e");
    hilock_lock *holder = hl_new_lock(h, "cv-e");
    hilock_cond *ca, *cb, *ch;
    assert_status(hilock_cond_create(&ca, la, "e"), HILOCK_OK);
    assert_status(hilock_cond_create(&cb, lb, "e"), HILOCK_OK);
    assert_status(hilock_cond_create(&ch, holder, "e"), HILOCK_OK);
    wait_outcome oa = {0}, ob = {.release = true};

    start_wait(la, ca, 1, 1500, &oa, "hilock_cond_line:{cv-e}:e", 1);
    start_wait(lb, cb, 2, HILOCK_WAIT_FOREVER, &ob,
               "hilock_cond_line:{cv-e}:e", 2);
    /* a is signalled while the lock is held: it cannot take it again in
     * its time, and its signal goes to b, which gets the lock once the
     * holder lets go. */
    assert_status(hilock_lock_acquire(holder), HILOCK_OK);
    int64_t woken = 0;
    assert_status(hilock_cond_signal(ch, &woken), HILOCK_OK);
    assert_int_equal(woken, 1);
    hl_expect_count(&oa.done, 1, hl_widen(10000));
    assert_int_equal(atomic_load(&oa.status), HILOCK_ETIMEDOUT);
    expect_int("LLEN", "hilock_cond_line:{cv-e}:e", 0);
    assert_int_equal(atomic_load(&ob.done), 0);
    assert_status(hilock_lock_release(holder), HILOCK_OK);
    hl_expect_count(&ob.done, 1, hl_widen(10000));
    assert_int_equal(atomic_load(&ob.status), HILOCK_OK);

    hilock_cond_destroy(ca);
    hilock_cond_destroy(cb);
    hilock_cond_destroy(ch);
    hl_free_lock(la);
    hl_free_lock(lb);
    hl_free_lock(holder);
    hl_free_client(a);
    hl_free_client(b);
    hl_free_client(h);
}

/* A waiter killed (kill -9) after it took a signal: the signal passes to
 * the next waiter within the waiter timeout, with no second signal. */
static void test_a_dead_waiters_signal_passes_on(void **state)
{
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = hl_children_fork(&fx.kids, 0);
    if (pid == 0) {
        close(ready[0]);
        hl_client_opts o = {.waiter_ms = 1500};
        char why[256];
        hilock_client *c = hl_open_client(fx.server, &o, why, sizeof why);
        hilock_lock *l = NULL;
        hilock_cond *cv = NULL;
        if (c == NULL || hilock_lock_create(&l, c, "cv-f") != HILOCK_OK ||
            hilock_cond_create(&cv, l, "f") != HILOCK_OK ||
            hilock_lock_acquire(l) != HILOCK_OK)
            _exit(2);
        /* Tell the test the wait is about to start; it is stopped once
         * in line. */
        if (write(ready[1], "w", 1) != 1)
            _exit(3);
        (void)hilock_cond_wait(cv, HILOCK_WAIT_FOREVER);
        _exit(0);
    }
    close(ready[1]);
    char byte;
    assert_true(hl_read_exact(ready[0], &byte, 1, hl_widen(20000)));
    close(ready[0]);
    expect_int("LLEN", "hilock_cond_line:{cv-f}:f", 1);
    /* Frozen, then killed: it takes no signal, and polls no more. */
    assert_int_equal(kill(pid, SIGSTOP), 0);

    hl_client_opts opts = {.waiter_ms = 1500};
    hilock_client *b = hl_new_client(fx.server, &opts);
    hilock_client *s = hl_new_client(fx.server, NULL);
    hilock_lock *lb = hl_new_lock(b, "cv-f"), *ls = hl_new_lock(s, "cv-f");
    hilock_cond *cb, *cs;
    assert_status(hilock_cond_create(&cb, lb, "f"), HILOCK_OK);
    assert_status(hilock_cond_create(&cs, ls, "f"), HILOCK_OK);
    wait_outcome ob = {.release = true};
    start_wait(lb, cb, 3, HILOCK_WAIT_FOREVER, &ob,
               "hilock_cond_line:{cv-f}:f", 2);
    /* The dead waiter's place is still good: the signal is its. */
    int64_t woken = 0;
    assert_status(hilock_cond_signal(cs, &woken), HILOCK_OK);
    assert_int_equal(woken, 1);
    assert_int_equal(hl_children_kill(&fx.kids, 0), 0);
    /* b's looks pass the signal on once the dead one's time to take it
     * is over: b wakes with no signal sent again. */
    hl_expect_count(&ob.done, 1, hl_widen(15000));
    assert_int_equal(atomic_load(&ob.status), HILOCK_OK);

    hilock_cond_destroy(cb);
    hilock_cond_destroy(cs);
    hl_free_lock(lb);
    hl_free_lock(ls);
    hl_free_client(b);
    hl_free_client(s);
}

/* What a wait refuses, leaving the hold as it was. */
static void test_refused_waits(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(a, "cv-g");
    hilock_lock *reader = hl_new_read_lock(a, "cv-rw");
    hilock_cond *cv;
    assert_status(hilock_cond_create(&cv, lock, "g"), HILOCK_OK);

    assert_status(hilock_cond_wait(cv, 100), HILOCK_ENOTOWNER);
    assert_status(hilock_lock_acquire(lock), HILOCK_OK);
    assert_status(hilock_lock_acquire(lock), HILOCK_OK);
    assert_status(hilock_cond_wait(cv, 100), HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "held once"));
    assert_int_equal(server_int("EXISTS", "cv-g"), 1);
    assert_int_equal(server_int("LLEN", "hilock_cond_line:{cv-g}:g"), 0);
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    assert_status(hilock_cond_wait(cv, -5), HILOCK_EINVAL);
    assert_status(hilock_cond_wait(NULL, 0), HILOCK_EINVAL);
    assert_status(hilock_cond_wait_async(cv, 1, 0, NULL, NULL, NULL),
                  HILOCK_EINVAL);
    assert_status(hilock_cond_signal(NULL, NULL), HILOCK_EINVAL);

    hilock_cond *bad = NULL;
    assert_status(hilock_cond_create(&bad, reader, "r"), HILOCK_EINVAL);
    assert_null(bad);
    assert_status(hilock_cond_create(&bad, lock, ""), HILOCK_EINVAL);
    char long_name[HILOCK_COND_MAX_NAME_LEN + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_status(hilock_cond_create(&bad, lock, long_name), HILOCK_EINVAL);
    assert_status(hilock_cond_create(NULL, lock, "x"), HILOCK_EINVAL);
    size_t len = 0;
    assert_string_equal(hilock_cond_name(cv, &len), "g");
    assert_int_equal(len, 1);
    hilock_cond_destroy(NULL);

    hilock_cond_destroy(cv);
    hl_free_lock(reader);
    hl_free_lock(lock);
    hl_free_client(a);
}

/* A fair lock's waiter too, and the destroy of a condition ends its
 * waits. */
static void test_fair_and_destroy(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *fa = hl_new_fair_lock(a, "cv-h"), *fb = hl_new_fair_lock(b, "cv-h");
    hilock_cond *ca, *cb;
    assert_status(hilock_cond_create(&ca, fa, "h"), HILOCK_OK);
    assert_status(hilock_cond_create(&cb, fb, "h"), HILOCK_OK);
    wait_outcome o = {.release = true};
    start_wait(fa, ca, 4, HILOCK_WAIT_FOREVER, &o, "hilock_cond_line:{cv-h}:h",
               1);
    int64_t woken = 0;
    assert_status(hilock_cond_signal(cb, &woken), HILOCK_OK);
    assert_int_equal(woken, 1);
    hl_expect_count(&o.done, 1, hl_widen(10000));
    assert_int_equal(atomic_load(&o.status), HILOCK_OK);
    expect_int("EXISTS", "cv-h", 0);

    wait_outcome d = {0};
    start_wait(fa, ca, 4, HILOCK_WAIT_FOREVER, &d, "hilock_cond_line:{cv-h}:h",
               1);
    hilock_cond_destroy(ca);
    hl_expect_count(&d.done, 1, hl_widen(10000));
    assert_int_equal(atomic_load(&d.status), HILOCK_ECANCELED);
    expect_int("LLEN", "hilock_cond_line:{cv-h}:h", 0);

    hilock_cond_destroy(cb);
    hl_free_lock(fa);
    hl_free_lock(fb);
    hl_free_client(a);
    hl_free_client(b);
}

/* A holder whose client sets a lock delay waits: its release into the
 * line is a clean release, which leaves no delay behind, so another
 * client takes the lock at once; woken, the waiter's hold writes its
 * delay key again.  Reentrant and fair. */
static void wait_with_a_delay(bool fair)
{
    const char *name = fair ? "cv-df" : "cv-dr";
    char url[96], delay_key[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?lock_delay=5000",
             hl_redis_server_port(fx.server));
    snprintf(delay_key, sizeof delay_key, "hilock_lock_delay:{%s}", name);
    hilock_options *o;
    hilock_client *a;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_client_create(&a, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la = fair ? hl_new_fair_lock(a, name) : hl_new_lock(a, name);
    hilock_lock *lb = fair ? hl_new_fair_lock(b, name) : hl_new_lock(b, name);
    hilock_cond *ca, *cb;
    assert_status(hilock_cond_create(&ca, la, "d"), HILOCK_OK);
    assert_status(hilock_cond_create(&cb, lb, "d"), HILOCK_OK);
    char line[64];
    snprintf(line, sizeof line, "hilock_cond_line:{%s}:d", name);
    wait_outcome o_ = {0};

    start_wait(la, ca, 6, HILOCK_WAIT_FOREVER, &o_, line, 1);
    assert_int_equal(server_int("EXISTS", delay_key), 0);
    assert_status(hilock_lock_try_acquire(lb, 0, HILOCK_LEASE_WATCHDOG),
                  HILOCK_OK);
    assert_status(hilock_lock_release(lb), HILOCK_OK);
    int64_t woken = 0;
    assert_status(hilock_cond_signal(cb, &woken), HILOCK_OK);
    assert_int_equal(woken, 1);
    hl_expect_count(&o_.done, 1, hl_widen(10000));
    assert_int_equal(atomic_load(&o_.status), HILOCK_OK);
    assert_int_equal(server_int("EXISTS", delay_key), 1);
    assert_status(hilock_lock_release_as(la, 6), HILOCK_OK);
    assert_int_equal(server_int("EXISTS", delay_key), 0);

    hilock_cond_destroy(ca);
    hilock_cond_destroy(cb);
    hl_free_lock(la);
    hl_free_lock(lb);
    hilock_client_destroy(a);
    hl_free_client(b);
}

static void test_wait_with_a_lock_delay(void **state)
{
    (void)state;
    wait_with_a_delay(false);
    wait_with_a_delay(true);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_wait_then_signal),
        T(test_signal_one_broadcast_all),
        T(test_signal_with_its_message_lost),
        T(test_timeout_and_cancel),
        T(test_a_timed_out_waiter_passes_its_signal_on),
        T(test_a_dead_waiters_signal_passes_on),
        T(test_refused_waits),
        T(test_fair_and_destroy),
        T(test_wait_with_a_lock_delay),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
