/* Semaphores under faults, on a real server: an acquire whose answer is
 * lost (the server asleep past the command timeout) takes nothing for
 * good and its wait goes on; a grant that lands after its acquire was
 * cancelled comes back, however many connections its give-back needs; a
 * release whose answer is lost gives its permits back exactly once, and
 * the attempt it carried is reconciled as any; and a minute of CLIENT
 * KILL under contention leaves the count exactly where it began, with
 * never more holders than permits. */
/* ctest-timeout: 300 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

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

/* A client whose requests time out well within a DEBUG SLEEP of the
 * server's, so that an answer is lost while the request still runs. */
static hilock_client *impatient_client(void)
{
    const hl_client_opts opts = {
        .command_timeout_ms = hl_under_valgrind() ? 3000 : 150};
    return hl_new_client(server, &opts);
}

static double sleep_s(void)
{
    return hl_under_valgrind() ? 8.0 : 0.6;
}

/* The free count on the server. */
static long long free_count(const char *name)
{
    char v[32];
    if (!hl_raw_bulk(server, v, sizeof v, "GET", name, (char *)NULL))
        return -1;
    return atoll(v);
}

/* Wait until the free count is want, or the deadline. */
static long long expect_free(const char *name, long long want, int ms)
{
    long long deadline = hl_now_ms() + hl_widen(ms);
    long long v = free_count(name);
    while (v != want && hl_now_ms() < deadline) {
        hl_sleep_ms(20);
        v = free_count(name);
    }
    return v;
}

/* How many of the semaphore's records hold what an attempt or a release
 * did (a number), rather than a voided attempt's "void". */
static long records_with_counts(const char *name)
{
    char pattern[96], reply[HL_RAW_REPLY_CAP], key[128], v[32];
    const char *p = reply;
    long n, counted = 0;

    snprintf(pattern, sizeof pattern, "hilock_sem_record:{%s}:*", name);
    assert_int_equal(hl_raw_cmd(server, reply, sizeof reply, "KEYS",
                                pattern, (char *)NULL),
                     '*');
    n = hl_raw_parse_array(&p);
    for (long i = 0; i < n; i++) {
        assert_true(hl_raw_parse_bulk(&p, key, sizeof key) > 0);
        if (hl_raw_bulk(server, v, sizeof v, "GET", key, (char *)NULL) &&
            strcmp(v, "void") != 0)
            counted++;
    }
    return counted;
}

/* ---- an acquire whose answer is lost ------------------------------------ */

/* The attempt runs once the server wakes, but its answer was lost with
 * the connection the client reset at its command timeout.  The reconcile
 * gives back (or voids) whatever it took, and the wait goes on to a grant
 * of its own: afterwards exactly the initial permits are free again. */
static void unknown_outcome(bool expirable)
{
    const char *name = expirable ? "sf-lost-permit" : "sf-lost-plain";
    hilock_client *c = impatient_client();
    hilock_semaphore *s = hl_new_semaphore(c, name, expirable);
    char id[HILOCK_PERMIT_ID_MAX];
    assert_status(hilock_semaphore_set(s, 2), HILOCK_OK);

    hl_fixture_debug_sleep(server, sleep_s());
    if (expirable)
        assert_status(hilock_permit_acquire(hl_permits_of(s), hl_widen(20000),
                                            HILOCK_LEASE_WATCHDOG, id),
                      HILOCK_OK);
    else
        assert_status(hilock_semaphore_try_acquire(s, 1, hl_widen(20000)),
                      HILOCK_OK);
    /* One permit is held: the lost attempt holds none. */
    assert_int_equal(expect_free(name, 1, 5000), 1);
    if (expirable) {
        char zkey[64];
        snprintf(zkey, sizeof zkey, "{%s}:timeout", name);
        assert_int_equal(hl_raw_int(server, "ZCARD", zkey, (char *)NULL), 1);
        assert_status(hilock_permit_release(hl_permits_of(s), id), HILOCK_OK);
    } else {
        assert_status(hilock_semaphore_release(s, 1), HILOCK_OK);
    }
    assert_int_equal(expect_free(name, 2, 5000), 2);
    /* No record of what took or gave back permits outlives its use: the
     * lost attempt's is voided, the release consumed the grant's. */
    assert_status(hl_semaphore_destroy_any(s), HILOCK_OK);
    assert_int_equal(records_with_counts(name), 0);
    hl_free_client(c);
}

static void test_plain_unknown_outcome(void **state)
{
    (void)state;
    unknown_outcome(false);
}

static void test_permit_unknown_outcome(void **state)
{
    (void)state;
    unknown_outcome(true);
}

/* ---- a grant after a cancel ---------------------------------------------- */

typedef struct rec {
    atomic_int calls;
    atomic_int status;
} rec;

static void record(hilock_semaphore *s, int status, int64_t value,
                   void *data)
{
    (void)s;
    (void)value;
    rec *r = data;
    atomic_store(&r->status, status);
    atomic_fetch_add(&r->calls, 1);
}

static void record_permit(hilock_permit_semaphore *s, int status,
                          const char *id, void *data)
{
    (void)id;
    record(hilock_permit_semaphore_base(s), status, 0, data);
}

/* The acquire is cancelled while its attempt waits in the sleeping
 * server; the attempt then runs, and its answer is lost too.  The
 * give-back is sent again on every new connection until the server
 * answers it: the permit comes back. */
static void cancelled(bool expirable)
{
    const char *name = expirable ? "sf-cancel-permit" : "sf-cancel-plain";
    hilock_client *c = impatient_client();
    hilock_semaphore *s = hl_new_semaphore(c, name, expirable);
    assert_status(hilock_semaphore_set(s, 1), HILOCK_OK);
    rec r;
    memset(&r, 0, sizeof r);
    uint64_t op = 0;

    hl_fixture_debug_sleep(server, sleep_s());
    if (expirable)
        assert_status(hilock_permit_acquire_async(
                          hl_permits_of(s), HILOCK_WAIT_FOREVER,
                          HILOCK_LEASE_WATCHDOG, record_permit, &r, &op),
                      HILOCK_OK);
    else
        assert_status(hilock_semaphore_try_acquire_async(
                          s, 1, HILOCK_WAIT_FOREVER, record, &r, &op),
                      HILOCK_OK);
    assert_status(hilock_semaphore_cancel(s, op), HILOCK_OK);
    hl_expect_count(&r.calls, 1, 5000);
    assert_int_equal(atomic_load(&r.status), HILOCK_ECANCELED);
    assert_status(hilock_semaphore_cancel(s, op), HILOCK_ENOTFOUND);
    assert_int_equal(expect_free(name, 1, 10000), 1);
    /* And it is free for anyone. */
    hilock_client *other = hl_new_client(server, NULL);
    hilock_semaphore *o = hl_new_semaphore(other, name, expirable);
    char id[HILOCK_PERMIT_ID_MAX];
    if (expirable)
        assert_status(hilock_permit_acquire(hl_permits_of(o), 0, 10000, id),
                      HILOCK_OK);
    else
        assert_status(hilock_semaphore_try_acquire(o, 1, 0), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(o), HILOCK_OK);
    hl_free_client(other);
    assert_status(hl_semaphore_destroy_any(s), HILOCK_OK);
    hl_free_client(c);
}

static void test_plain_cancelled_grant_comes_back(void **state)
{
    (void)state;
    cancelled(false);
}

static void test_permit_cancelled_grant_comes_back(void **state)
{
    (void)state;
    cancelled(true);
}

/* ---- a release whose answer is lost -------------------------------------- */

/* The release runs in the sleeping server, its answer is lost, and the
 * client sends it again: the permits come back once.  Released on the
 * handle that took them, the release consumes the record of their grant;
 * on another handle, which kept no such grant, it writes a record of its
 * own. */
static void release_given_back_once(bool same_handle)
{
    const char *name = same_handle ? "sf-release-same" : "sf-release-other";
    hilock_client *c = impatient_client();
    hilock_semaphore *s = hl_new_semaphore(c, name, false);
    hilock_semaphore *other = hl_new_semaphore(c, name, false);
    hilock_semaphore *releaser = same_handle ? s : other;
    assert_status(hilock_semaphore_set(s, 3), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(s, 2, 0), HILOCK_OK);
    assert_int_equal(records_with_counts(name), 1); /* the grant's */
    rec r;
    memset(&r, 0, sizeof r);
    hl_fixture_debug_sleep(server, sleep_s());
    assert_status(hilock_semaphore_release_async(releaser, 2, record, &r),
                  HILOCK_OK);
    hl_expect_count(&r.calls, 1, hl_widen(20000));
    assert_int_equal(atomic_load(&r.status), HILOCK_OK);
    assert_int_equal(free_count(name), 3);
    int64_t v = 0;
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_int_equal(v, 3);
    assert_status(hl_semaphore_destroy_any(other), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(s), HILOCK_OK);
    /* Consumed, forgotten after the answer, or dropped with the handle
     * that kept it. */
    long long deadline = hl_now_ms() + hl_widen(5000);
    while (records_with_counts(name) != 0 && hl_now_ms() < deadline)
        hl_sleep_ms(20);
    assert_int_equal(records_with_counts(name), 0);
    hl_free_client(c);
}

static void test_release_on_the_granting_handle_given_back_once(void **state)
{
    (void)state;
    release_given_back_once(true);
}

static void test_release_on_another_handle_given_back_once(void **state)
{
    (void)state;
    release_given_back_once(false);
}


/* A release that carries a waiter's attempt loses its answer: the
 * release is sent again and gives nothing back twice, the attempt's
 * outcome is unknown and its reconcile gives back what it took, and the
 * waiter's wait goes on to a grant of its own.  With the one permit,
 * the count is 0 while the waiter holds and 1 after it let go: nothing
 * lost, nothing duplicated. */
static void test_release_carrying_an_attempt_loses_its_answer(void **state)
{
    const char *name = "sf-release-carrying";
    hilock_client *c = impatient_client();
    hilock_semaphore *held = hl_new_semaphore(c, name, false);
    hilock_semaphore *waiting = hl_new_semaphore(c, name, false);
    static hl_sem_rec got;
    rec r;

    (void)state;
    memset(&got, 0, sizeof got);
    memset(&r, 0, sizeof r);
    assert_status(hilock_semaphore_set(held, 1), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(held, 1, 0), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(
                      waiting, 1, hl_widen(30000), hl_record_sem, &got,
                      NULL),
                  HILOCK_OK);
    hl_expect_idle(c, hl_semaphore_lock(waiting), 1);
    hl_fixture_debug_sleep(server, sleep_s());
    assert_status(hilock_semaphore_release_async(held, 1, record, &r),
                  HILOCK_OK);
    hl_expect_count(&r.calls, 1, hl_widen(20000));
    assert_int_equal(atomic_load(&r.status), HILOCK_OK);
    hl_expect_count(&got.calls, 1, hl_widen(20000));
    assert_status(got.status, HILOCK_OK);
    assert_int_equal(expect_free(name, 0, 5000), 0);
    assert_status(hilock_semaphore_release(waiting, 1), HILOCK_OK);
    assert_int_equal(expect_free(name, 1, 5000), 1);
    assert_status(hl_semaphore_destroy_any(waiting), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(held), HILOCK_OK);
    long long deadline = hl_now_ms() + hl_widen(5000);
    while (records_with_counts(name) != 0 && hl_now_ms() < deadline)
        hl_sleep_ms(20);
    assert_int_equal(records_with_counts(name), 0);
    hl_free_client(c);
}

/* ---- a minute of CLIENT KILL under contention ----------------------------- */

#define PERMITS 3
#define WORKERS 6

typedef struct contention {
    hilock_semaphore *sem[2]; /* one handle per client */
    bool expirable;
    atomic_int inside;
    atomic_int most_inside;
    atomic_long cycles;
    atomic_bool stop;
} contention;

typedef struct worker {
    contention *k;
    int index;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    contention *k = w->k;
    hilock_semaphore *s = k->sem[w->index % 2];
    char id[HILOCK_PERMIT_ID_MAX];
    while (!atomic_load(&k->stop)) {
        int rc = k->expirable ? hilock_permit_acquire(hl_permits_of(s), 2000,
                                                      HILOCK_LEASE_WATCHDOG, id)
                              : hilock_semaphore_try_acquire(s, 1, 2000);
        if (rc != HILOCK_OK)
            continue; /* busy, or the connection was killed meanwhile */
        int now = atomic_fetch_add(&k->inside, 1) + 1;
        int most = atomic_load(&k->most_inside);
        while (now > most &&
               !atomic_compare_exchange_weak(&k->most_inside, &most, now))
            ;
        atomic_fetch_sub(&k->inside, 1);
        /* A release whose answer is lost is sent again by the library,
         * so its status here is no reason to release again. */
        if (k->expirable)
            (void)hilock_permit_release(hl_permits_of(s), id);
        else
            (void)hilock_semaphore_release(s, 1);
        atomic_fetch_add(&k->cycles, 1);
    }
    return NULL;
}

static void kill_under_contention(bool expirable, const char *name)
{
    const hl_client_opts opts = {.watchdog_ms = 3000};
    hilock_client *c[2] = {hl_new_client(server, &opts),
                           hl_new_client(server, &opts)};
    contention k;
    memset(&k, 0, sizeof k);
    k.expirable = expirable;
    for (int i = 0; i < 2; i++)
        k.sem[i] = hl_new_semaphore(c[i], name, expirable);
    assert_status(hilock_semaphore_set(k.sem[0], PERMITS), HILOCK_OK);

    worker w[WORKERS];
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (worker){.k = &k, .index = i};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    long long seconds = hl_under_valgrind() ? 10 : 60;
    long long end = hl_now_ms() + seconds * 1000;
    long long kills = 0;
    unsigned seed = 7;
    while (hl_now_ms() < end) {
        hl_sleep_ms(100 + (int)(rand_r(&seed) % 400));
        kills += hl_fixture_client_kill(server, "normal");
    }
    atomic_store(&k.stop, true);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    assert_true(kills > 0);
    assert_true(atomic_load(&k.cycles) > 0);
    assert_true(atomic_load(&k.most_inside) <= PERMITS);
    /* Nothing lost, nothing given back twice: once every give-back and
     * resent release has landed (and, for permits, every lease lost to a
     * killed renewal has run out and been taken back, which
     * hilock_semaphore_available does), the count is where it began. */
    long long left = -1;
    long long deadline = hl_now_ms() + hl_widen(30000);
    for (;;) {
        int64_t v = -1;
        if (hilock_semaphore_available(k.sem[0], &v) == HILOCK_OK)
            left = v;
        if (left == PERMITS || hl_now_ms() >= deadline)
            break;
        hl_sleep_ms(50);
    }
    printf("%s: %ld cycles, %lld kills, at most %d inside, %lld free\n",
           name, atomic_load(&k.cycles), kills, atomic_load(&k.most_inside),
           left);
    assert_int_equal(left, PERMITS);
    if (expirable) {
        char zkey[64];
        snprintf(zkey, sizeof zkey, "{%s}:timeout", name);
        assert_int_equal(hl_raw_int(server, "ZCARD", zkey, (char *)NULL), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_status(hl_semaphore_destroy_any(k.sem[i]), HILOCK_OK);
        hl_free_client(c[i]);
    }
}

static void test_plain_client_kill_for_a_minute(void **state)
{
    (void)state;
    kill_under_contention(false, "sf-kill-plain");
}

static void test_permit_client_kill_for_a_minute(void **state)
{
    (void)state;
    kill_under_contention(true, "sf-kill-permit");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_unknown_outcome),
        cmocka_unit_test(test_permit_unknown_outcome),
        cmocka_unit_test(test_plain_cancelled_grant_comes_back),
        cmocka_unit_test(test_permit_cancelled_grant_comes_back),
        cmocka_unit_test(test_release_on_the_granting_handle_given_back_once),
        cmocka_unit_test(test_release_on_another_handle_given_back_once),
        cmocka_unit_test(test_release_carrying_an_attempt_loses_its_answer),
        cmocka_unit_test(test_plain_client_kill_for_a_minute),
        cmocka_unit_test(test_permit_client_kill_for_a_minute),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
