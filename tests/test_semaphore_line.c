/* The line of waiting clients behind both semaphore kinds, on a real
 * server: permits coming back wake one waiting process, which passes
 * what it leaves over on to the next; a waiter for many lets a smaller
 * one behind it by; a client that died in line holds the permits up only
 * until its place runs out; Redisson's releases wake our line and ours
 * reach Redisson's waiters; a client alone in line wakes its own
 * waiters without a message; and a release carries the attempt of its
 * client's next waiter. */
/* ctest-timeout: 180 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/mutex_checker.h"
#include "support/plain_sub.h"
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

/* ---- helpers ------------------------------------------------------------ */

/* How long a waiter of these tests may take to be woken by a message.
 * Its own attempts come every third of the waiter timeout, which
 * patient_client makes twice as long: a waiter that moved within this
 * was moved by a message, not by an attempt of its own. */
static int prompt_ms(void)
{
    return hl_widen(10000);
}

/* A client whose waiters renew their place only every third of
 * hl_widen(60000) ms, which no test here lasts: every attempt they make
 * answers a wake-up. */
static hilock_client *patient_client(void)
{
    return hl_new_client(server,
                         &(hl_client_opts){.waiter_ms = hl_widen(60000)});
}

/* A fixed lease is never renewed, and this one outlasts every test: no
 * renewal script runs while a permit of these tests is held. */
static int64_t permit_lease_ms(void)
{
    return hl_widen(60000);
}

/* Every script the server has run so far. */
static long long scripts_run(void)
{
    return hl_fixture_calls(server, "evalsha") +
           hl_fixture_calls(server, "eval");
}

/* "<prefix>:{name}": one of the line's keys (hilock_sem_line,
 * hilock_sem_alive, hilock_sem_next) for the semaphore name. */
static void line_key(char *out, size_t cap, const char *prefix,
                     const char *name)
{
    int n = snprintf(out, cap, "%s:{%s}", prefix, name);
    assert_true(n > 0 && (size_t)n < cap);
}

/* Where c's waiters for the semaphore name are woken. */
static void wake_channel(char *out, size_t cap, const char *name,
                         const hilock_client *c)
{
    int n = snprintf(out, cap, "hilock_sem_wake:{%s}:%s", name,
                     hilock_client_id(c));
    assert_true(n > 0 && (size_t)n < cap);
}

/* The client at index at of the semaphore's line, "" past its end. */
static void in_line_at(const char *name, long at, char *out, size_t cap)
{
    char key[128], index[24];
    line_key(key, sizeof key, "hilock_sem_line", name);
    snprintf(index, sizeof index, "%ld", at);
    hl_raw_bulk(server, out, cap, "LINDEX", key, index, (char *)NULL);
}

static void assert_in_line_at(const char *name, long at,
                              const hilock_client *c)
{
    char who[64];
    in_line_at(name, at, who, sizeof who);
    if (strcmp(who, hilock_client_id(c)) != 0)
        fail_msg("%s is at %ld in the line of %s, not %s", who, at, name,
                 hilock_client_id(c));
}

static long long line_length(const char *name)
{
    char key[128];
    line_key(key, sizeof key, "hilock_sem_line", name);
    return hl_raw_int(server, "LLEN", key, (char *)NULL);
}

/* The free permits, read without a script of the library's. */
static long long free_permits(const char *name)
{
    char count[32];
    if (!hl_raw_bulk(server, count, sizeof count, "GET", name, (char *)NULL))
        return 0;
    return atoll(count);
}

/* A thread that takes one permit, waiting as long as it takes, records
 * the hold in mc (when there is one) and gives the permit back at once. */
typedef struct taker {
    pthread_t thread;
    hilock_semaphore *sem;
    bool expirable;
    hl_mutex_checker *mc;
    uint32_t id; /* the holder, as mc reports it */
    int rc;
    int release_rc;
    int64_t acquired_at;
    atomic_bool done;
} taker;

static void *taker_main(void *arg)
{
    taker *t = arg;
    char permit[HILOCK_PERMIT_ID_MAX];

    if (t->expirable)
        t->rc =
            hilock_permit_acquire(hl_permits_of(t->sem), HILOCK_WAIT_FOREVER,
                                  permit_lease_ms(), permit);
    else
        t->rc = hilock_semaphore_try_acquire(t->sem, 1, HILOCK_WAIT_FOREVER);
    t->acquired_at = hl_now_ms();
    if (t->rc == HILOCK_OK) {
        if (t->mc != NULL)
            hl_mutex_checker_exit(t->mc,
                                  hl_mutex_checker_enter(t->mc, t->id, 0));
        t->release_rc =
            t->expirable ? hilock_permit_release(hl_permits_of(t->sem), permit)
                         : hilock_semaphore_release(t->sem, 1);
    }
    atomic_store(&t->done, true);
    return NULL;
}

static void taker_start(taker *t, hilock_semaphore *sem, bool expirable,
                        hl_mutex_checker *mc, uint32_t id)
{
    memset(t, 0, sizeof *t);
    t->sem = sem;
    t->expirable = expirable;
    t->mc = mc;
    t->id = id;
    t->rc = -1;
    t->release_rc = -1;
    atomic_init(&t->done, false);
    assert_int_equal(pthread_create(&t->thread, NULL, taker_main, t), 0);
}

/* Joins t, which must have taken its permit and given it back. */
static void taker_join_ok(taker *t, int timeout_ms)
{
    hl_join_within(t->thread, &t->done, timeout_ms);
    assert_status(t->rc, HILOCK_OK);
    assert_status(t->release_rc, HILOCK_OK);
}

/* Waits for the one callback of an acquire, which must have taken its
 * permits. */
static void expect_granted(hl_sem_rec *r)
{
    hl_expect_count(&r->calls, 1, prompt_ms());
    assert_status(r->status, HILOCK_OK);
}

/* ---- a release wakes one waiting client --------------------------------- */

#define HERD 8

/* HERD clients (processes, as far as the server can tell) wait for the
 * one permit a holder has, each with a waiter that gives it back at
 * once.  Each release promises the permit to the first client in line
 * and wakes that client alone, whose attempt takes it: the line drains
 * in one acquire and one release per client, after the holder's release.
 * Were every waiting client woken by every release, each would try and
 * be refused, some HERD^2/2 scripts more.  One permit is a mutex, which
 * the checker shows was kept. */
static void release_wakes_one_client(bool expirable, const char *name)
{
    hilock_client *holder = patient_client();
    hilock_semaphore *held = hl_new_semaphore(holder, name, expirable);
    hl_mutex_checker *mc = hl_mutex_checker_create(HERD, 0);
    hilock_client *c[HERD];
    hilock_semaphore *s[HERD];
    taker t[HERD];
    char permit[HILOCK_PERMIT_ID_MAX];
    char why[256];

    assert_non_null(mc);
    assert_status(hilock_semaphore_set(held, 1), HILOCK_OK);
    if (expirable)
        assert_status(hilock_permit_acquire(hl_permits_of(held), 0,
                                            permit_lease_ms(), permit),
                      HILOCK_OK);
    else
        assert_status(hilock_semaphore_try_acquire(held, 1, 0), HILOCK_OK);
    for (int i = 0; i < HERD; i++) {
        c[i] = patient_client();
        s[i] = hl_new_semaphore(c[i], name, expirable);
        taker_start(&t[i], s[i], expirable, mc, (uint32_t)i);
        /* Refused and listening: only a message moves it now. */
        hl_expect_idle(c[i], hl_semaphore_lock(s[i]), 1);
    }
    long long before = scripts_run();
    if (expirable)
        assert_status(hilock_permit_release(hl_permits_of(held), permit),
                      HILOCK_OK);
    else
        assert_status(hilock_semaphore_release(held, 1), HILOCK_OK);
    for (int i = 0; i < HERD; i++)
        taker_join_ok(&t[i], hl_widen(30000));
    long long scripts = scripts_run() - before;
    print_message("    %s: %d waiting clients drained with %lld scripts\n",
                  name, HERD, scripts);
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), HERD);
    /* The holder's release, then each client's release, and the attempt
     * of each client promised the permit rather than handed it (an
     * expirable permit is never handed: its lease is its owner's). */
    long long handed = 0;
    for (int i = 0; i < HERD; i++)
        handed += (long long)hl_handed_to(c[i]);
    print_message("    %lld of them handed straight to the client\n", handed);
    if (expirable)
        assert_int_equal(handed, 0);
    else
        assert_true(handed > 0);
    assert_int_equal(scripts, 1 + HERD + (HERD - handed));
    for (int i = 0; i < HERD; i++) {
        assert_status(hl_semaphore_destroy_any(s[i]), HILOCK_OK);
        hl_free_client(c[i]);
    }
    hl_mutex_checker_free(mc);
    assert_status(hl_semaphore_destroy_any(held), HILOCK_OK);
    hl_free_client(holder);
}

/* The plain semaphore's release wakes one client. */
static void test_plain_release_wakes_one_client(void **state)
{
    (void)state;
    release_wakes_one_client(false, "line-herd-plain");
}

/* The same for expirable permits, whose leases are fixed and outlast
 * the test, so that no renewal adds to the count. */
static void test_permit_release_wakes_one_client(void **state)
{
    (void)state;
    release_wakes_one_client(true, "line-herd-permit");
}

/* ---- permits for several clients ---------------------------------------- */

#define MANY_WAITING 4
#define MANY_RELEASED 3

/* Four clients wait for a permit each, and three come back at once.  The
 * release wakes the first client in line, and each grant that leaves
 * permits free promises them to the next and wakes it: the first three
 * in line get a permit, each long before an attempt of its own would
 * have found it, and the fourth waits on, alone in line, until one of
 * them gives its permit back. */
static void test_release_of_many_wakes_as_many(void **state)
{
    const char *name = "line-many";
    hilock_client *giver = patient_client();
    hilock_semaphore *given = hl_new_semaphore(giver, name, false);
    hilock_client *c[MANY_WAITING];
    hilock_semaphore *s[MANY_WAITING];
    static hl_sem_rec got[MANY_WAITING];

    (void)state;
    memset(got, 0, sizeof got);
    assert_status(hilock_semaphore_set(given, 0), HILOCK_OK);
    for (int i = 0; i < MANY_WAITING; i++) {
        c[i] = patient_client();
        s[i] = hl_new_semaphore(c[i], name, false);
        assert_status(hilock_semaphore_try_acquire_async(
                          s[i], 1, HILOCK_WAIT_FOREVER, hl_record_sem,
                          &got[i], NULL),
                      HILOCK_OK);
        hl_expect_idle(c[i], hl_semaphore_lock(s[i]), 1);
        assert_in_line_at(name, i, c[i]);
    }
    int64_t released_at = hl_now_ms();
    assert_status(hilock_semaphore_release(given, MANY_RELEASED), HILOCK_OK);
    for (int i = 0; i < MANY_RELEASED; i++) {
        expect_granted(&got[i]);
        print_message("    client %d of the line got its permit %lld ms "
                      "after the release\n",
                      i, (long long)(got[i].at_ms - released_at));
    }
    /* The third grant left nothing to pass on. */
    assert_int_equal(free_permits(name), 0);
    assert_int_equal(atomic_load(&got[MANY_RELEASED].calls), 0);
    assert_int_equal(line_length(name), 1);
    assert_in_line_at(name, 0, c[MANY_RELEASED]);
    assert_status(hilock_semaphore_release(s[0], 1), HILOCK_OK);
    expect_granted(&got[MANY_RELEASED]);
    assert_int_equal(free_permits(name), 0);
    assert_int_equal(line_length(name), 0);
    for (int i = 0; i < MANY_WAITING; i++) {
        assert_status(hl_semaphore_destroy_any(s[i]), HILOCK_OK);
        hl_free_client(c[i]);
    }
    assert_status(hl_semaphore_destroy_any(given), HILOCK_OK);
    hl_free_client(giver);
}

/* ---- a big request lets a small one by ---------------------------------- */

static bool promise_spent(void *arg)
{
    char key[128];
    line_key(key, sizeof key, "hilock_sem_next", arg);
    return hl_raw_exists(server, key) == 0;
}

/* A client waiting for 3 permits is first in line, one waiting for 1
 * behind it.  The single permit that comes back is promised to the
 * first, which finds too few for itself and passes the promise by to
 * the second; the first keeps its place at the head of the line, and is
 * promised the next permits that come, so that it gets its 3 as soon as
 * there are 3. */
static void test_big_request_passes_permits_by(void **state)
{
    const char *name = "line-big";
    hilock_client *giver = patient_client();
    hilock_client *big = patient_client();
    hilock_client *small = patient_client();
    hilock_semaphore *given = hl_new_semaphore(giver, name, false);
    hilock_semaphore *sb = hl_new_semaphore(big, name, false);
    hilock_semaphore *ss = hl_new_semaphore(small, name, false);
    static hl_sem_rec got_big, got_small;

    (void)state;
    memset(&got_big, 0, sizeof got_big);
    memset(&got_small, 0, sizeof got_small);
    assert_status(hilock_semaphore_set(given, 0), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(
                      sb, 3, HILOCK_WAIT_FOREVER, hl_record_sem, &got_big,
                      NULL),
                  HILOCK_OK);
    hl_expect_idle(big, hl_semaphore_lock(sb), 1);
    assert_status(hilock_semaphore_try_acquire_async(
                      ss, 1, HILOCK_WAIT_FOREVER, hl_record_sem, &got_small,
                      NULL),
                  HILOCK_OK);
    hl_expect_idle(small, hl_semaphore_lock(ss), 1);
    assert_in_line_at(name, 0, big);
    assert_in_line_at(name, 1, small);

    assert_status(hilock_semaphore_release(given, 1), HILOCK_OK);
    expect_granted(&got_small);
    assert_int_equal(atomic_load(&got_big.calls), 0);
    assert_int_equal(line_length(name), 1);
    assert_in_line_at(name, 0, big);

    /* The permit back: promised to the big waiter, which spends the
     * promise on finding 1 of its 3, and waits on at the head. */
    assert_status(hilock_semaphore_release(ss, 1), HILOCK_OK);
    if (!hl_wait_until(promise_spent, (void *)name, prompt_ms()))
        fail_msg("the promise to the big waiter was not spent");
    hl_expect_idle(big, hl_semaphore_lock(sb), 1);
    assert_int_equal(atomic_load(&got_big.calls), 0);
    assert_in_line_at(name, 0, big);
    assert_int_equal(free_permits(name), 1);

    assert_status(hilock_semaphore_release(given, 3), HILOCK_OK);
    expect_granted(&got_big);
    assert_int_equal(free_permits(name), 1);
    assert_int_equal(line_length(name), 0);
    assert_status(hl_semaphore_destroy_any(ss), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(sb), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(given), HILOCK_OK);
    hl_free_client(small);
    hl_free_client(big);
    hl_free_client(giver);
}

/* ---- a client that died in line ----------------------------------------- */

#define DEAD_CLIENT "9c3f6a1e-2b7d-4e58-a0c4-5d8e1f2a3b6c"
#define PLACE_MS 3000

/* A client whose process died stands first in line, its place running
 * out PLACE_MS from now on the server's clock.  The release promises it
 * the permit, which is kept for it only until that place runs out: a
 * newcomer's try is refused meanwhile, and says why; the live waiter
 * behind it, whose attempts come every third of its waiter timeout (as
 * long as the dead one's place), gets the permit once the promise has
 * run out and not before, and its release drops the dead client from
 * the line and its places. */
static void test_dead_client_in_line_passed_over(void **state)
{
    const char *name = "line-dead";
    hilock_client *giver = hl_new_client(server, NULL);
    hilock_client *live =
        hl_new_client(server, &(hl_client_opts){.waiter_ms = PLACE_MS});
    hilock_client *newcomer = hl_new_client(server, NULL);
    hilock_semaphore *given = hl_new_semaphore(giver, name, false);
    hilock_semaphore *sl = hl_new_semaphore(live, name, false);
    hilock_semaphore *sn = hl_new_semaphore(newcomer, name, false);
    char line[128], places[128], promise[128], at[32], who[64];
    char refusal[256];
    taker t;

    (void)state;
    line_key(line, sizeof line, "hilock_sem_line", name);
    line_key(places, sizeof places, "hilock_sem_alive", name);
    line_key(promise, sizeof promise, "hilock_sem_next", name);
    assert_status(hilock_semaphore_set(given, 0), HILOCK_OK);
    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(server) + PLACE_MS);
    hl_raw_int(server, "RPUSH", line, DEAD_CLIENT, (char *)NULL);
    hl_raw_int(server, "ZADD", places, at, DEAD_CLIENT, (char *)NULL);
    taker_start(&t, sl, false, NULL, 0);
    hl_expect_idle(live, hl_semaphore_lock(sl), 1);
    assert_in_line_at(name, 1, live);
    /* The dead client's place is set anew right before the release, so
     * that the newcomer's try below comes well within it. */
    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(server) + PLACE_MS);
    hl_raw_int(server, "ZADD", places, at, DEAD_CLIENT, (char *)NULL);

    assert_status(hilock_semaphore_release(given, 1), HILOCK_OK);
    int64_t asked_at = hl_now_ms();
    long long promise_left = hl_raw_pttl(server, promise);
    assert_true(hl_raw_bulk(server, who, sizeof who, "GET", promise,
                            (char *)NULL));
    assert_string_equal(who, DEAD_CLIENT);
    assert_status(hilock_semaphore_try_acquire(sn, 1, 0), HILOCK_EBUSY);
    /* Read at the end, once the rest has been shown. */
    snprintf(refusal, sizeof refusal, "%s", hilock_last_error());

    taker_join_ok(&t, hl_widen(PLACE_MS + 10000));
    print_message("    dead client in line: the live waiter got the permit "
                  "%lld ms after the promise had %lld ms left\n",
                  (long long)(t.acquired_at - asked_at), promise_left);
    /* Not before the promise ran out on the server (a few ms allow for
     * the two clocks' rounding). */
    if (t.acquired_at - asked_at < promise_left - 5)
        fail_msg("the live waiter got the permit %lld ms after the "
                 "promise to the dead client had %lld ms left",
                 (long long)(t.acquired_at - asked_at), promise_left);
    assert_false(hl_raw_bulk(server, who, sizeof who, "ZSCORE", places,
                             DEAD_CLIENT, (char *)NULL));
    assert_int_equal(line_length(name), 0);
    /* A permit was free: the refusal says it was promised, not that too
     * few were free. */
    if (strstr(refusal, "promised") == NULL)
        fail_msg("the newcomer was refused with \"%s\"", refusal);
    assert_status(hl_semaphore_destroy_any(sn), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(sl), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(given), HILOCK_OK);
    hl_free_client(newcomer);
    hl_free_client(live);
    hl_free_client(giver);
}

/* ---- Redisson's releases and ours --------------------------------------- */

#define JAVA_WAITERS 3

/* Of our clients waiting in line, only the first listens on Redisson's
 * channel.  A Java release (the count raised, the new count published
 * there) wakes it, and each grant passes the permits left over on to
 * the next client in line: all three get a permit long before an
 * attempt of their own would have found one. */
static void test_java_release_wakes_our_line(void **state)
{
    const char *name = "line-java";
    const char *redisson = "redisson_sc:{line-java}";
    hilock_client *c[JAVA_WAITERS];
    hilock_semaphore *s[JAVA_WAITERS];
    static hl_sem_rec got[JAVA_WAITERS];

    (void)state;
    memset(got, 0, sizeof got);
    char reply[64];
    hl_raw_cmd(server, reply, sizeof reply, "SET", name, "0", (char *)NULL);
    for (int i = 0; i < JAVA_WAITERS; i++) {
        c[i] = patient_client();
        s[i] = hl_new_semaphore(c[i], name, false);
        assert_status(hilock_semaphore_try_acquire_async(
                          s[i], 1, HILOCK_WAIT_FOREVER, hl_record_sem,
                          &got[i], NULL),
                      HILOCK_OK);
        hl_expect_idle(c[i], hl_semaphore_lock(s[i]), 1);
    }
    hl_expect_numsub(server, redisson, 1, 1);
    /* Its own channel and Redisson's for the first; its own for the
     * others, which ask nothing more and so will not subscribe. */
    assert_int_equal(hl_read_pending(c[0], hl_semaphore_lock(s[0])).channels,
                     2);
    for (int i = 1; i < JAVA_WAITERS; i++)
        assert_int_equal(
            hl_read_pending(c[i], hl_semaphore_lock(s[i])).channels, 1);
    assert_int_equal(hl_fixture_numsub(server, redisson), 1);

    int64_t released_at = hl_now_ms();
    assert_int_equal(hl_raw_int(server, "INCRBY", name, "3", (char *)NULL),
                     3);
    assert_int_equal(hl_raw_int(server, "PUBLISH", redisson, "3",
                                (char *)NULL),
                     1);
    for (int i = 0; i < JAVA_WAITERS; i++)
        expect_granted(&got[i]);
    print_message("    java release: %d waiters through in %lld ms\n",
                  JAVA_WAITERS, (long long)(hl_now_ms() - released_at));
    assert_int_equal(free_permits(name), 0);
    assert_int_equal(line_length(name), 0);
    for (int i = 0; i < JAVA_WAITERS; i++) {
        assert_status(hl_semaphore_destroy_any(s[i]), HILOCK_OK);
        hl_free_client(c[i]);
    }
}

/* A Java waiter listens on Redisson's channel beside our client first in
 * line.  Our release promises the permit to that client and wakes it on
 * its own channel, and, since someone besides it listens on Redisson's,
 * announces the new count there too: the Java waiter hears of it, and
 * may try for the permit as Redisson does. */
static void test_our_release_wakes_a_java_waiter(void **state)
{
    const char *name = "line-tojava";
    const char *redisson = "redisson_sc:{line-tojava}";
    hilock_client *waiting = patient_client();
    hilock_client *releasing = patient_client();
    hilock_semaphore *sw = hl_new_semaphore(waiting, name, false);
    hilock_semaphore *sr = hl_new_semaphore(releasing, name, false);
    static hl_sem_rec got;
    char heard[64];

    (void)state;
    memset(&got, 0, sizeof got);
    /* Before the Java waiter listens: the count set is announced too. */
    assert_status(hilock_semaphore_set(sr, 0), HILOCK_OK);
    hl_plain_sub *java = hl_plain_sub_open(server, redisson);
    assert_status(hilock_semaphore_try_acquire_async(
                      sw, 1, HILOCK_WAIT_FOREVER, hl_record_sem, &got, NULL),
                  HILOCK_OK);
    hl_expect_idle(waiting, hl_semaphore_lock(sw), 1);
    assert_in_line_at(name, 0, waiting);
    /* Our first client and the Java waiter. */
    hl_expect_numsub(server, redisson, 2, 2);

    assert_status(hilock_semaphore_release(sr, 1), HILOCK_OK);
    if (!hl_plain_sub_next(java, heard, sizeof heard, prompt_ms()))
        fail_msg("the Java waiter heard nothing of the release");
    assert_string_equal(heard, "1");
    expect_granted(&got);
    hl_plain_sub_close(java);
    assert_status(hl_semaphore_destroy_any(sr), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(sw), HILOCK_OK);
    hl_free_client(releasing);
    hl_free_client(waiting);
}

/* ---- a client alone in line --------------------------------------------- */

#define OWN_WAITERS 4

/* One client, first and alone in line, its four waiters contending for
 * one permit through handles of their own.  Each release, the holder's
 * and then the waiters', finds no other client to promise the permit to
 * and says so; the client wakes its next waiter itself.  All four get
 * through, one at a time, and nothing is ever published on the client's
 * own channel: a subscriber there hears the test's own end mark first. */
static void test_one_process_alone_wakes_itself(void **state)
{
    const char *name = "line-alone";
    hilock_client *c = patient_client();
    hilock_semaphore *held = hl_new_semaphore(c, name, false);
    hilock_semaphore *s[OWN_WAITERS];
    hl_mutex_checker *mc = hl_mutex_checker_create(OWN_WAITERS, 0);
    taker t[OWN_WAITERS];
    char own[128], heard[64], why[256];

    (void)state;
    assert_non_null(mc);
    wake_channel(own, sizeof own, name, c);
    hl_plain_sub *listener = hl_plain_sub_open(server, own);
    assert_status(hilock_semaphore_set(held, 1), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(held, 1, 0), HILOCK_OK);
    for (int i = 0; i < OWN_WAITERS; i++) {
        s[i] = hl_new_semaphore(c, name, false);
        taker_start(&t[i], s[i], false, mc, (uint32_t)i);
        /* The first asks the server and is refused; the others wait
         * behind it in the client, without asking. */
        if (i == 0)
            hl_expect_idle(c, hl_semaphore_lock(s[i]), 1);
        else
            hl_expect_pending(c, hl_semaphore_lock(s[i]), 1);
    }
    assert_int_equal(line_length(name), 1);
    assert_in_line_at(name, 0, c);

    assert_status(hilock_semaphore_release(held, 1), HILOCK_OK);
    for (int i = 0; i < OWN_WAITERS; i++)
        taker_join_ok(&t[i], hl_widen(20000));
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    assert_int_equal(hl_mutex_checker_count(mc), OWN_WAITERS);
    assert_int_equal(free_permits(name), 1);
    assert_int_equal(line_length(name), 0);
    /* Messages reach a subscriber in the order they were published: any
     * wake-up the scripts sent would come before this mark. */
    hl_raw_int(server, "PUBLISH", own, "end", (char *)NULL);
    if (!hl_plain_sub_next(listener, heard, sizeof heard, prompt_ms()))
        fail_msg("the end mark did not come");
    assert_string_equal(heard, "end");
    hl_plain_sub_close(listener);
    for (int i = 0; i < OWN_WAITERS; i++)
        assert_status(hl_semaphore_destroy_any(s[i]), HILOCK_OK);
    hl_mutex_checker_free(mc);
    assert_status(hl_semaphore_destroy_any(held), HILOCK_OK);
    hl_free_client(c);
}

/* A release takes the attempt of its client's next waiter along: a
 * waiter of the client of the permit's holder, refused and listening, is
 * granted by the holder's release in that release's own script, where a
 * release that woke it would cost a second script, its attempt, a round
 * trip later. */
static void test_release_carries_next_attempt(void **state)
{
    const char *name = "line-carried";
    hilock_client *c = patient_client();
    hilock_semaphore *held = hl_new_semaphore(c, name, false);
    hilock_semaphore *waiting = hl_new_semaphore(c, name, false);
    static hl_sem_rec got;

    (void)state;
    memset(&got, 0, sizeof got);
    assert_status(hilock_semaphore_set(held, 1), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire(held, 1, 0), HILOCK_OK);
    assert_status(hilock_semaphore_try_acquire_async(
                      waiting, 1, HILOCK_WAIT_FOREVER, hl_record_sem, &got,
                      NULL),
                  HILOCK_OK);
    hl_expect_idle(c, hl_semaphore_lock(waiting), 1);
    assert_in_line_at(name, 0, c);

    long long before = scripts_run();
    assert_status(hilock_semaphore_release(held, 1), HILOCK_OK);
    expect_granted(&got);
    assert_int_equal(scripts_run() - before, 1);
    assert_int_equal(free_permits(name), 0);
    /* Nobody of the client waits any more: it left the line. */
    assert_int_equal(line_length(name), 0);
    assert_status(hilock_semaphore_release(waiting, 1), HILOCK_OK);
    assert_int_equal(free_permits(name), 1);
    assert_status(hl_semaphore_destroy_any(waiting), HILOCK_OK);
    assert_status(hl_semaphore_destroy_any(held), HILOCK_OK);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_release_wakes_one_client),
        cmocka_unit_test(test_permit_release_wakes_one_client),
        cmocka_unit_test(test_release_of_many_wakes_as_many),
        cmocka_unit_test(test_big_request_passes_permits_by),
        cmocka_unit_test(test_dead_client_in_line_passed_over),
        cmocka_unit_test(test_java_release_wakes_our_line),
        cmocka_unit_test(test_our_release_wakes_a_java_waiter),
        cmocka_unit_test(test_one_process_alone_wakes_itself),
        cmocka_unit_test(test_release_carries_next_attempt),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
