/* Failure injection: fail the n-th allocation hilock makes, for every n,
 * through a whole acquire / renew / release sequence, and check that each
 * run ends with a clean error or success, never a crash or a leak (the
 * sanitizer and valgrind runs of the suite check the leaks), and that the
 * lock is never left held behind the caller's back. */
/* ctest-timeout: 240 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/base/handle.h"
#include "core/engine/lease.h"
#include "core/engine/lock_handle.h"
#include "hilock/rwlock.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"

/* Counts allocations; the one numbered fail_at (from 1) returns NULL.  The
 * memory still comes from the C library, so swapping the table while
 * objects are alive is safe here.  live counts blocks not given back, so
 * that a test which installs the table before its client exists sees a
 * leak in every build, not only under a leak checker; it means nothing
 * where objects made before the swap are freed after it.  Handles freed
 * stay in the quarantine of core/handle.h until drained. */
static atomic_long alloc_count;
static atomic_long fail_at;
static atomic_long failures;
static atomic_long live;

static atomic_bool fail_rest; /* fail_at and every allocation after it */

static bool should_fail(void)
{
    long n = atomic_fetch_add(&alloc_count, 1) + 1;
    long at = atomic_load(&fail_at);
    if (n == at || (at > 0 && n > at && atomic_load(&fail_rest))) {
        atomic_fetch_add(&failures, 1);
        return true;
    }
    return false;
}

static void *counted(void *p)
{
    if (p != NULL)
        atomic_fetch_add(&live, 1);
    return p;
}

static void *counting_malloc(size_t n)
{
    return should_fail() ? NULL : counted(malloc(n));
}
static void *counting_calloc(size_t c, size_t n)
{
    return should_fail() ? NULL : counted(calloc(c, n));
}
static void *counting_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    void *q = realloc(p, n);
    return p == NULL ? counted(q) : q;
}
static void counting_free(void *p)
{
    if (p != NULL)
        atomic_fetch_sub(&live, 1);
    free(p);
}

static const hilock_allocators counting = {counting_malloc, counting_calloc,
                                           counting_realloc, counting_free};

static void arm(long n)
{
    atomic_store(&fail_at, 0);
    atomic_store(&fail_rest, false);
    atomic_store(&alloc_count, 0);
    atomic_store(&fail_at, n);
}

/* Fail the n-th allocation and every one after it, until arm(0). */
static void arm_from(long n)
{
    atomic_store(&fail_at, 0);
    atomic_store(&fail_rest, true);
    atomic_store(&alloc_count, 0);
    atomic_store(&fail_at, n);
}

static int is_expected(int rc)
{
    /* HILOCK_EINDOUBT: a release whose answer was lost (here, for want
     * of memory to read it) counts as done, and is not repeated.
     * HILOCK_ENOACK: the WAIT behind a grant, or the replica count it is
     * judged by, could not be asked for want of memory, so the grant
     * went back; a count read over a second ago asks for a WAIT. */
    return rc == HILOCK_OK || rc == HILOCK_ENOMEM || rc == HILOCK_EIO ||
           rc == HILOCK_ETIMEDOUT || rc == HILOCK_ENOTOWNER ||
           rc == HILOCK_ELEASELOST || rc == HILOCK_EPROTO ||
           rc == HILOCK_EINDOUBT || rc == HILOCK_ENOACK;
}

/* One full sequence: create a lock, acquire fenced with the watchdog,
 * reenter, force a renewal round, release twice, destroy. */
static int sequence(hilock_client *c, const char *name)
{
    hilock_lock *lock = NULL;
    int rc = hilock_lock_create(&lock, c, name);
    if (rc != HILOCK_OK) {
        assert_true(rc == HILOCK_ENOMEM);
        return 1;
    }
    int worst = 0;
    uint64_t token = 0;
    rc = hilock_lock_acquire_fenced(lock, 2000, HILOCK_LEASE_WATCHDOG,
                                    &token);
    if (!is_expected(rc))
        fail_msg("acquire returned %s: %s", hilock_errname(rc),
                 hilock_last_error());
    int held = rc == HILOCK_OK;
    worst |= rc != HILOCK_OK;
    if (held) {
        rc = hilock_lock_try_acquire(lock, 0, HILOCK_LEASE_WATCHDOG);
        if (!is_expected(rc))
            fail_msg("reentry returned %s: %s", hilock_errname(rc),
                     hilock_last_error());
        held += rc == HILOCK_OK;
        worst |= rc != HILOCK_OK;
    }
    for (int i = 0; i < held; i++) {
        /* A caller whose release failed for want of memory tries again;
         * what must not happen is a hold nobody knows of. */
        do
            rc = hilock_lock_release(lock);
        while (rc == HILOCK_ENOMEM);
        if (!is_expected(rc))
            fail_msg("release returned %s: %s", hilock_errname(rc),
                     hilock_last_error());
        worst |= rc != HILOCK_OK;
    }
    assert_int_equal(hilock_lock_destroy(lock), HILOCK_OK);
    return worst;
}

static void test_every_allocation_fails_once(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?watchdog_timeout=1000",
             hl_redis_server_port(s));
    hilock_options *o;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(o, url), HILOCK_OK);
    hilock_client *c;
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);

    assert_int_equal(hilock_set_allocators(&counting), HILOCK_OK);
    /* How many allocations a clean run makes. */
    arm(0);
    assert_int_equal(sequence(c, "alloc:clean"), 0);
    long clean = atomic_load(&alloc_count);
    assert_true(clean > 10);

    long limit = getenv("HILOCK_TEST_UNDER_VALGRIND") ? clean / 4 + 1
                                                      : clean + 20;
    for (long n = 1; n <= limit; n++) {
        char name[64];
        snprintf(name, sizeof name, "alloc:%ld", n);
        arm(n);
        sequence(c, name);
        arm(0);
        /* Whatever failed, nothing of this owner may stay held: a hold the
         * client does not know of would block everyone until it expires. */
        const char *argv[] = {"EXISTS", name};
        hilock_reply *r = NULL;
        int rc = HILOCK_EIO;
        int64_t deadline = hl_now_ms() + 5000;
        while (rc != HILOCK_OK && hl_now_ms() < deadline)
            rc = hilock_client_command(c, 2, argv, NULL, &r);
        assert_int_equal(rc, HILOCK_OK);
        if (r->integer != 0)
            fail_msg("allocation %ld failing left %s held", n, name);
        hilock_reply_free(r);
    }
    assert_true(atomic_load(&failures) > 0);
    hilock_set_allocators(NULL);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    hl_redis_server_stop(s);
}

/* A client of s with the counting table already in place, so that live
 * covers everything the client allocates. */
static hilock_client *counted_client(hl_redis_server *s, int64_t watchdog_ms)
{
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?watchdog_timeout=%lld",
             hl_redis_server_port(s), (long long)watchdog_ms);
    hilock_options *o;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    hilock_client *c = NULL;
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    /* The card is written on the loop thread once the connection is up:
     * counted, it would come into a run or not as the threads race. */
    hl_card_wait card = {c, hilock_client_id(c)};
    assert_true(hl_wait_until(hl_card_is_there, &card, hl_widen(10000)));
    return c;
}

/* A call on a lock nobody holds ended in a clean error, or in success with
 * the answer an unheld lock gives.  Returns whether it succeeded. */
static bool clean_answer(const char *call, int rc, bool right_answer)
{
    if (!is_expected(rc))
        fail_msg("%s returned %s: %s", call, hilock_errname(rc),
                 hilock_last_error());
    if (rc == HILOCK_OK && !right_answer)
        fail_msg("%s succeeded with a wrong answer for an unheld lock", call);
    return rc == HILOCK_OK;
}

/* Every call a handle offers that needs no acquire before it, on a lock
 * nobody holds, by a client that never held one: the release is the first
 * call to want the client's lease engine, which is made on first use.
 * Returns 0 when the release said "not the owner" and every other call
 * succeeded, as they do with memory to spare. */
static void on_request(hilock_lock *lock, uint64_t owner, const char *reason,
                       size_t reason_len, void *user_data)
{
    (void)lock;
    (void)owner;
    (void)reason;
    (void)reason_len;
    (void)user_data;
}

static int calls_without_acquire(hilock_client *c, const char *name)
{
    hilock_lock *lock = NULL;
    int rc = hilock_lock_create(&lock, c, name);
    if (rc != HILOCK_OK) {
        assert_status(rc, HILOCK_ENOMEM);
        return 1;
    }
    int worst = 0;
    rc = hilock_lock_release(lock);
    clean_answer("release", rc, false);
    worst |= rc != HILOCK_ENOTOWNER;
    bool deleted = true;
    rc = hilock_lock_force_release(lock, &deleted);
    worst |= !clean_answer("force release", rc, !deleted);
    bool locked = true;
    rc = hilock_lock_is_locked(lock, &locked);
    worst |= !clean_answer("is_locked", rc, !locked);
    int64_t count = -1;
    rc = hilock_lock_hold_count(lock, &count);
    worst |= !clean_answer("hold_count", rc, count == 0);
    int64_t ttl = 0;
    rc = hilock_lock_remaining_ttl(lock, &ttl);
    worst |= !clean_answer("remaining_ttl", rc, ttl == -1);
    bool lost = true;
    rc = hilock_lock_lease_lost(lock, &lost);
    worst |= !clean_answer("lease_lost", rc, !lost);
    hilock_lock_status *st = NULL;
    rc = hilock_lock_status_get(lock, &st);
    if (rc != HILOCK_OK && st != NULL)
        fail_msg("status failed with %s and left a status behind",
                 hilock_errname(rc));
    worst |= !clean_answer("status", rc,
                           st != NULL && !st->locked && st->holders_len == 0);
    hilock_lock_status_free(st);
    /* The first callback allocates the handle's rare parts: a failure
     * there is a clean HILOCK_ENOMEM, and clearing never fails. */
    rc = hilock_lock_set_release_request_callback(lock, on_request, NULL);
    worst |= !clean_answer("set a release request callback", rc, true);
    assert_status(hilock_lock_set_release_request_callback(lock, NULL, NULL),
                  HILOCK_OK);
    assert_status(hilock_lock_destroy(lock), HILOCK_OK);
    return worst;
}

static void test_calls_without_acquire_fail_cleanly(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    assert_int_equal(hilock_set_allocators(&counting), HILOCK_OK);
    arm(0);
    long before = atomic_load(&live);
    long failures_before = atomic_load(&failures);

    /* The fewest of three clean runs: a loaded machine may add one of
     * its own now and then (a write left half done and buffered), and
     * every failing run below must reach the allocation it fails. */
    hilock_client *c;
    long clean = LONG_MAX;
    for (int i = 0; i < 3; i++) {
        c = counted_client(s, 1000);
        arm(0);
        assert_int_equal(calls_without_acquire(c, "bare:clean"), 0);
        long made = atomic_load(&alloc_count);
        clean = made < clean ? made : clean;
        assert_status(hilock_client_destroy(c), HILOCK_OK);
        hl_handle_drain();
        assert_int_equal(atomic_load(&live), before);
    }
    assert_true(clean > 5);

    /* A fresh client each time: the engine is made once per client, and
     * each allocation on the way to it has to fail in turn. */
    for (long n = 1; n <= clean + 5; n++) {
        char name[64];
        snprintf(name, sizeof name, "bare:%ld", n);
        c = counted_client(s, 1000);
        arm(n);
        calls_without_acquire(c, name);
        arm(0);
        assert_status(hilock_client_destroy(c), HILOCK_OK);
        hl_handle_drain();
        long leaked = atomic_load(&live) - before;
        if (leaked != 0)
            fail_msg("allocation %ld failing left %ld blocks allocated", n,
                     leaked);
    }
    assert_true(atomic_load(&failures) - failures_before >= clean);
    hilock_set_allocators(NULL);
    hl_redis_server_stop(s);
}

/* Leases of the reentrant kind in the renewal tests below: more than one
 * batch holds, so that a round sends a batch while others are open. */
#define ROUND_REENTRANT 120
#define ROUND_LEASES (ROUND_REENTRANT + 2)

typedef struct round_probe {
    hilock_lock **locks;
    long fail;        /* the allocation of the round to fail; 0: none */
    long allocations; /* the round made, the failed one included */
    hl_lease_stats before;
    hl_lease_stats after; /* once the round was sent */
    hl_monotime deadlines[ROUND_LEASES];
} round_probe;

static hl_lease *only_lease(hilock_lock *lock)
{
    assert_non_null(lock->holds);
    hl_lease *l = hl_hold_lease(lock->holds);
    assert_non_null(l);
    return l;
}

static void run_round(hilock_client *c, void *arg)
{
    round_probe *p = arg;
    for (int i = 0; i < ROUND_LEASES; i++)
        p->deadlines[i] = only_lease(p->locks[i])->deadline;
    p->before = hl_lease_engine_stats(c->leases);
    arm(p->fail);
    hl_lease_engine_renew_now(c->leases);
    p->allocations = atomic_load(&alloc_count);
    arm(0);
    p->after = hl_lease_engine_stats(c->leases);
}

static void read_lease_stats(hilock_client *c, void *arg)
{
    *(hl_lease_stats *)arg = hl_lease_engine_stats(c->leases);
}

static bool round_answered(void *arg)
{
    hl_lease_stats st;
    hl_run_on_loop(arg, read_lease_stats, &st);
    return st.renewing == 0;
}

typedef struct moved_count {
    round_probe *p;
    int moved;
} moved_count;

static void count_moved(hilock_client *c, void *arg)
{
    (void)c;
    moved_count *m = arg;
    m->moved = 0;
    for (int i = 0; i < ROUND_LEASES; i++)
        m->moved += only_lease(m->p->locks[i])->deadline != m->p->deadlines[i];
}

/* Runs one round failing allocation p->fail of it, waits for every call it
 * sent to be answered, and returns how many leases it renewed, after
 * checking that exactly those leases moved their deadline and that none
 * was lost. */
static uint64_t one_round(hilock_client *c, round_probe *p)
{
    hl_run_on_loop(c, run_round, p);
    if (!hl_wait_until(round_answered, c, hl_widen(10000)))
        fail_msg("renewals of round %ld still unanswered", p->fail);
    hl_lease_stats st;
    hl_run_on_loop(c, read_lease_stats, &st);
    uint64_t renewed = st.renewed - p->before.renewed;
    moved_count m = {p, 0};
    hl_run_on_loop(c, count_moved, &m);
    /* An unconfirmed renewal never moves a deadline. */
    assert_int_equal(m.moved, renewed);
    assert_int_equal(st.lost, 0);
    assert_int_equal(st.active, ROUND_LEASES);
    return renewed;
}

static void test_failures_in_a_renewal_round(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    assert_int_equal(hilock_set_allocators(&counting), HILOCK_OK);
    arm(0);
    long before = atomic_load(&live);
    /* Rounds are run by hand; the timer's would land between a round and
     * the counts checked after it. */
    hilock_client *c = counted_client(s, 600000);

    /* A read lock first and a write lock last around the reentrant ones:
     * a round opens batches of three scripts, sends a full one in the
     * middle and the others at its end. */
    static hilock_lock *locks[ROUND_LEASES];
    assert_status(hilock_read_lock_create(&locks[0], c, "round:r"),
                  HILOCK_OK);
    for (int i = 1; i <= ROUND_REENTRANT; i++) {
        char name[32];
        snprintf(name, sizeof name, "round:%d", i);
        assert_status(hilock_lock_create(&locks[i], c, name),
                      HILOCK_OK);
    }
    assert_status(hilock_write_lock_create(&locks[ROUND_LEASES - 1], c,
                                           "round:w"),
                  HILOCK_OK);
    for (int i = 0; i < ROUND_LEASES; i++)
        assert_status(hilock_lock_try_acquire(locks[i], hl_widen(5000),
                                              HILOCK_LEASE_WATCHDOG),
                      HILOCK_OK);

    static round_probe p;
    memset(&p, 0, sizeof p);
    p.locks = locks;
    assert_int_equal(one_round(c, &p), ROUND_LEASES);
    assert_int_equal(p.after.renew_calls - p.before.renew_calls, 4);
    long clean = p.allocations;
    assert_true(clean >= 4);

    bool some_left_out = false;
    for (long n = 1; n <= clean + 1; n++) {
        p.fail = n;
        long failures_before = atomic_load(&failures);
        uint64_t renewed = one_round(c, &p);
        if (p.allocations >= n)
            assert_int_equal(atomic_load(&failures), failures_before + 1);
        some_left_out |= renewed < ROUND_LEASES;
    }
    assert_true(some_left_out);

    /* The next round renews every lease as if nothing had happened. */
    p.fail = 0;
    assert_int_equal(one_round(c, &p), ROUND_LEASES);
    assert_int_equal(p.after.renew_calls - p.before.renew_calls, 4);

    for (int i = 0; i < ROUND_LEASES; i++) {
        assert_status(hilock_lock_release(locks[i]), HILOCK_OK);
        assert_status(hilock_lock_destroy(locks[i]), HILOCK_OK);
    }
    assert_status(hilock_client_destroy(c), HILOCK_OK);
    hl_handle_drain();
    long leaked = atomic_load(&live) - before;
    if (leaked != 0)
        fail_msg("%ld blocks still allocated after the client went", leaked);
    hilock_set_allocators(NULL);
    hl_redis_server_stop(s);
}

/* Whether a handle still has a hold listener (a group), read on its loop
 * thread. */
typedef struct group_probe {
    hilock_lock *lock;
    bool named;
} group_probe;

static void read_group(hilock_client *c, void *arg)
{
    (void)c;
    group_probe *p = arg;
    hl_lock_rare *r = hl_lock_rare_peek(p->lock);
    p->named = r != NULL && r->listeners != NULL;
}

/* Making a multi-lock over members on two clients, and a RedLock lock,
 * with every allocation failing from the n-th on, for every n until the
 * make succeeds: each failure is a clean HILOCK_ENOMEM that leaves no
 * member naming the freed group (a later loss would reach freed memory),
 * and nothing stays allocated once everything is gone.  Failing the rest
 * too, not the n-th alone, is what makes a rollback's own clean-up run
 * out of memory. */
static void test_group_create_fails_cleanly(void **state)
{
    (void)state;
    hl_redis_server *masters[3];
    hl_fixture_masters(masters, 3);
    assert_int_equal(hilock_set_allocators(&counting), HILOCK_OK);
    arm(0);
    long before = atomic_load(&live);
    hilock_client *c[2];
    hilock_lock *members[2];
    for (int i = 0; i < 2; i++) {
        c[i] = counted_client(masters[i], 600000);
        assert_status(hilock_lock_create(&members[i], c[i], "group:m"),
                      HILOCK_OK);
    }

    bool made = false;
    long n;
    for (n = 1; !made && n < 1000; n++) {
        hilock_multilock *m = NULL;
        arm_from(n);
        int rc = hilock_multilock_create(&m, members, 2);
        arm(0);
        if (rc == HILOCK_OK) {
            made = true;
            assert_status(hilock_multilock_destroy(m), HILOCK_OK);
        } else {
            assert_status(rc, HILOCK_ENOMEM);
            assert_null(m);
        }
        for (int i = 0; i < 2; i++) {
            group_probe p = {members[i], true};
            hl_run_on_loop(c[i], read_group, &p);
            if (p.named)
                fail_msg("allocations failing from number %ld on left "
                         "member %d naming a group after %s",
                         n, i, made ? "its destroy" : "a failed create");
        }
    }
    assert_true(made);
    assert_true(n > 2);

    char urls[3][64];
    const char *url_ptrs[3];
    for (int i = 0; i < 3; i++) {
        snprintf(urls[i], sizeof urls[i], "redis://127.0.0.1:%d",
                 hl_redis_server_port(masters[i]));
        url_ptrs[i] = urls[i];
    }
    hilock_redlock *rl = NULL;
    assert_status(hilock_redlock_create(&rl, url_ptrs, 3, NULL), HILOCK_OK);
    made = false;
    for (n = 1; !made && n < 1000; n++) {
        hilock_multilock *m = NULL;
        arm_from(n);
        int rc = hilock_redlock_multilock_create(&m, rl, "group:r");
        arm(0);
        if (rc == HILOCK_OK) {
            made = true;
            assert_status(hilock_multilock_destroy(m), HILOCK_OK);
        } else {
            assert_status(rc, HILOCK_ENOMEM);
            assert_null(m);
        }
    }
    assert_true(made);
    /* A failed make left no lock counted against the RedLock. */
    assert_status(hilock_redlock_destroy(rl), HILOCK_OK);

    for (int i = 0; i < 2; i++) {
        assert_status(hilock_lock_destroy(members[i]), HILOCK_OK);
        assert_status(hilock_client_destroy(c[i]), HILOCK_OK);
    }
    hl_handle_drain(); /* destroyed handles' memory is held back a while */
    long leaked = atomic_load(&live) - before;
    if (leaked != 0)
        fail_msg("%ld blocks still allocated after everything went",
                 leaked);
    hilock_set_allocators(NULL);
    hl_fixture_stop_masters(masters, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_fails_once),
        cmocka_unit_test(test_calls_without_acquire_fail_cleanly),
        cmocka_unit_test(test_failures_in_a_renewal_round),
        cmocka_unit_test(test_group_create_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
