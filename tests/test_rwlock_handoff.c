/* The read-write lock's direct hand-off between writer processes, against
 * a real redis-server: a release that frees the lock, a writer's or the
 * last reader's, gives the write lock outright to the wish of the first
 * waiting writer client, which then holds without an acquire of its own.
 * Each way the hand-off can go wrong has its test, as for the reentrant
 * lock (test_direct_handoff): the grant's message lost, the writer gone
 * before it hears of the grant, the waiting client dead, readers waiting
 * beside it, Java's clients on the same lock, and connections killed
 * under contention.  The server is observed through the fixture's own
 * connections. */
/* ctest-timeout: 120 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "hilock/rwlock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/line_handoff.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

/* Each test's server; see hl_lock_fixture. */
static hl_lock_fixture fx;

#define OWNER 7
#define READER 9

static hl_wish expect_wish(const char *name, hilock_client *c,
                           uint64_t owner)
{
    return hl_expect_wish(fx.server, &hl_rwlock_line_keys, name, c, owner);
}

/* The write hold count of owner's field of client c. */
static long long write_hold_of(const char *name, hilock_client *c,
                               uint64_t owner)
{
    char field[80];

    snprintf(field, sizeof field, "%s:%llu:write", hilock_client_id(c),
             (unsigned long long)owner);
    return hl_hold_of(fx.server, name, field);
}

static void expect_mode(const char *name, const char *mode)
{
    char got[16];

    if (!hl_raw_bulk(fx.server, got, sizeof got, "HGET", name, "mode",
                     (char *)NULL))
        fail_msg("the lock %s has no mode", name);
    assert_string_equal(got, mode);
}

/* ---- the hand-off ------------------------------------------------------- */

/* The last reader's release hands the lock to the waiting writer the same
 * way: one script, and the writer holds the write lock. */
static void test_last_read_release_hands_the_lock_over(void **state)
{
    hilock_client *r = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, NULL);
    hilock_lock *lr = hl_new_read_lock(r, "rh");
    hilock_lock *lw = hl_new_write_lock(w, "rh");
    static hl_acquire_rec rec;

    (void)state;
    assert_status(hilock_lock_try_acquire(lr, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    (void)expect_wish("rh", w, OWNER);

    long long before = hl_scripts_run(fx.server);
    assert_status(hilock_lock_release(lr), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(hl_scripts_run(fx.server) - before, 1);
    assert_int_equal(hl_handed_to(w), 1);
    assert_int_equal(write_hold_of("rh", w, OWNER), 1);
    expect_mode("rh", "write");
    assert_int_equal(hl_release_one(lw, OWNER), 0);
    assert_int_equal(hl_raw_exists(fx.server, "rh"), 0);
    hl_free_lock(lw);
    hl_free_lock(lr);
    hl_free_client(w);
    hl_free_client(r);
}

#define READERS 3

/* Readers of ours wait beside the writer, each client listening on
 * Redisson's channel, and each keeping a place among the readers
 * (HL_LAYOUT_RWLOCK_READERS): the release counts them as ours, not as
 * Java's waiters, and grants the writer's wish.  Nothing is announced on
 * Redisson's channel, so no reader wakes only to be refused while the
 * writer waits (the one PUBLISH is the grant's, on the writer's own
 * channel).  The writer's release, the writers' line empty, lets every
 * reader in. */
static void test_our_readers_beside_a_writer_do_not_stop_its_grant(
    void **state)
{
    static const char name[] = "rw-beside";
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_write_lock(h, name);
    hilock_lock *lw = hl_new_write_lock(w, name);
    hilock_client *r[READERS];
    hilock_lock *lr[READERS];
    static hl_acquire_rec wrec, rrec[READERS];
    char key[64];

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &wrec, NULL);
    (void)expect_wish(name, w, OWNER);
    for (int i = 0; i < READERS; i++) {
        r[i] = hl_new_client(fx.server, NULL);
        lr[i] = hl_new_read_lock(r[i], name);
        hl_wait_in_line(r[i], lr[i], READER, &rrec[i], NULL);
    }
    snprintf(key, sizeof key, "hilock_rwlock_readers:{%s}", name);
    assert_int_equal(hl_raw_int(fx.server, "ZCARD", key, (char *)NULL),
                     READERS);

    long long scripts = hl_scripts_run(fx.server);
    long long publishes = hl_fixture_calls(fx.server, "publish");
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&wrec), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 1);
    expect_mode(name, "write");
    assert_int_equal(hl_scripts_run(fx.server) - scripts, 1);
    assert_int_equal(hl_fixture_calls(fx.server, "publish") - publishes, 1);
    for (int i = 0; i < READERS; i++) {
        hl_expect_idle(r[i], lr[i], 1);
        assert_int_equal(atomic_load(&rrec[i].calls), 0);
    }

    assert_int_equal(hl_release_one(lw, OWNER), 0);
    for (int i = 0; i < READERS; i++)
        assert_status(hl_expect_acquire(&rrec[i]), HILOCK_OK);
    expect_mode(name, "read");
    /* Granted, each reader's client gave its place up. */
    assert_int_equal(hl_raw_exists(fx.server, key), 0);
    for (int i = 0; i < READERS; i++) {
        assert_int_equal(hl_release_one(lr[i], READER), 0);
        hl_free_lock(lr[i]);
        hl_free_client(r[i]);
    }
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

/* Beside our readers, a Java waiter on Redisson's channel is still told:
 * the release promises the lock to the writer and announces, and the
 * writer takes it with its attempt. */
static void test_java_waiter_beside_our_readers_is_told(void **state)
{
    static const char name[] = "rw-beside-java";
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, NULL);
    hilock_client *r = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_write_lock(h, name);
    hilock_lock *lw = hl_new_write_lock(w, name);
    hilock_lock *lr = hl_new_read_lock(r, name);
    static hl_acquire_rec wrec, rrec;
    char channel[64], heard[16];

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
    hl_plain_sub *java = hl_plain_sub_open(fx.server, channel);
    assert_non_null(java);
    hl_wait_in_line(w, lw, OWNER, &wrec, NULL);
    (void)expect_wish(name, w, OWNER);
    hl_wait_in_line(r, lr, READER, &rrec, NULL);

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    if (!hl_plain_sub_next(java, heard, sizeof heard, hl_widen(10000)))
        fail_msg("the Java waiter was not told of the release");
    assert_status(hl_expect_acquire(&wrec), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 0);
    expect_mode(name, "write");
    hl_plain_sub_close(java);

    assert_int_equal(hl_release_one(lw, OWNER), 0);
    assert_status(hl_expect_acquire(&rrec), HILOCK_OK);
    assert_int_equal(hl_release_one(lr, READER), 0);
    hl_free_lock(lr);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(r);
    hl_free_client(w);
    hl_free_client(h);
}

/* A writer that asks for a lease of its own records no wish (only a
 * watchdog lease can be granted), so a release promises it the lock. */
static void wait_in_line_leased(hilock_client *c, hilock_lock *lock,
                                hl_acquire_rec *rec)
{
    hl_acquire_rec_init(rec, c);
    assert_status(hilock_lock_acquire_async(lock, OWNER, HILOCK_WAIT_FOREVER,
                                            30000, 0, hl_record_acquire, rec,
                                            NULL),
                  HILOCK_OK);
    hl_expect_idle(c, lock, 1);
}

/* Where a release promises the lock rather than grant it (writers that
 * record no wish here; every writer on Sentinel, a cluster or under a
 * replica policy), our readers waiting beside the writers hear nothing of
 * a hand-off between two writers: they would wake only to be refused.
 * The first hand-off goes to a writer told it was first, which listens on
 * Redisson's channel, where a subscriber more than the readers may be
 * that writer or a Java waiter, so that release announces.  The second
 * goes to a writer never told so: every subscriber there is a reader of
 * ours, and the release says nothing there, unless a Java waiter listens
 * too (java), which must hear it.  Every client waits long between its
 * own attempts (40 s: waiter timeout 120 s), so that none renews its
 * place meanwhile, even on a busy machine. */
static void promised_handoff_beside_readers(const char *name, bool java)
{
    const hl_client_opts slow = {.waiter_ms = 120000};
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_write_lock(h, name);
    hilock_client *w[2], *r[READERS];
    hilock_lock *lw[2], *lr[READERS];
    static hl_acquire_rec wrec[2], rrec[READERS];
    hl_plain_sub *sub = NULL;
    char channel[64], heard[16];

    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    for (int i = 0; i < 2; i++) {
        w[i] = hl_new_client(fx.server, &slow);
        lw[i] = hl_new_write_lock(w[i], name);
        wait_in_line_leased(w[i], lw[i], &wrec[i]);
    }
    for (int i = 0; i < READERS; i++) {
        r[i] = hl_new_client(fx.server, &slow);
        lr[i] = hl_new_read_lock(r[i], name);
        hl_wait_in_line(r[i], lr[i], READER, &rrec[i], NULL);
    }

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&wrec[0]), HILOCK_OK);
    assert_int_equal(hl_handed_to(w[0]), 0);
    for (int i = 0; i < READERS; i++)
        hl_expect_idle(r[i], lr[i], 1);
    if (java) {
        snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
        sub = hl_plain_sub_open(fx.server, channel);
        assert_non_null(sub);
    }

    long long scripts = hl_scripts_run(fx.server);
    long long publishes = hl_fixture_calls(fx.server, "publish");
    assert_int_equal(hl_release_one(lw[0], OWNER), 0);
    assert_status(hl_expect_acquire(&wrec[1]), HILOCK_OK);
    expect_mode(name, "write");
    for (int i = 0; i < READERS; i++) {
        hl_expect_idle(r[i], lr[i], 1);
        assert_int_equal(atomic_load(&rrec[i].calls), 0);
    }
    if (java) {
        if (!hl_plain_sub_next(sub, heard, sizeof heard, hl_widen(10000)))
            fail_msg("the Java waiter was not told of the release");
        assert_string_equal(heard, "1");
        hl_plain_sub_close(sub);
    } else {
        /* The release, and the promised writer's attempt. */
        assert_int_equal(hl_scripts_run(fx.server) - scripts, 2);
        assert_int_equal(hl_fixture_calls(fx.server, "publish") - publishes,
                         1);
    }

    /* The writers gone, the last release lets every reader in. */
    assert_int_equal(hl_release_one(lw[1], OWNER), 0);
    for (int i = 0; i < READERS; i++)
        assert_status(hl_expect_acquire(&rrec[i]), HILOCK_OK);
    expect_mode(name, "read");
    for (int i = 0; i < READERS; i++) {
        assert_int_equal(hl_release_one(lr[i], READER), 0);
        hl_free_lock(lr[i]);
        hl_free_client(r[i]);
    }
    for (int i = 0; i < 2; i++) {
        hl_free_lock(lw[i]);
        hl_free_client(w[i]);
    }
    hl_free_lock(lh);
    hl_free_client(h);
}

static void test_our_readers_sleep_through_promised_handoffs(void **state)
{
    (void)state;
    promised_handoff_beside_readers("rw-promised", false);
}

static void test_java_waiter_beside_promised_handoffs_is_told(void **state)
{
    (void)state;
    promised_handoff_beside_readers("rw-promised-java", true);
}

#define CASE(test, fn, name)                                                \
    static void test(void **state)                                          \
    {                                                                       \
        (void)state;                                                        \
        fn(fx.server, &hl_writers_line, name);                              \
    }

/* ---- as the reentrant lock's (support/line_handoff.h) ------------------- */

CASE(test_write_release_hands_the_lock_over, hl_case_release_hands_over,
     "wh")
CASE(test_grant_record_goes_with_the_next_hold,
     hl_case_grant_record_goes_with_next_hold, "w-grant-record")
CASE(test_line_and_places_kept_together, hl_case_line_keys_kept_together,
     "w-kept-line")
CASE(test_lost_grant_message_is_claimed, hl_case_lost_grant_claimed,
     "w-unheard")
CASE(test_gone_writer_gives_its_grant_back, hl_case_gone_waiter_gives_back,
     "w-given-back")
CASE(test_dead_client_grant_runs_out_with_its_place,
     hl_case_dead_client_grant, "w-dead-wish")
CASE(test_wake_ups_both_ways_beside_java, hl_case_wake_ups_beside_java,
     "w-mixed")
CASE(test_java_waiter_is_told_not_passed_over, hl_case_java_waiter_told,
     "w-java-beside")
CASE(test_java_waiter_beside_a_dead_first_client_is_told,
     hl_case_java_waiter_told_beside_dead_first, "w-java-beside-dead-first")

/* ---- under faults ------------------------------------------------------- */

/* Grants go out unheard while pub/sub connections are killed, and are
 * claimed, or given back by writers that gave up (handoff.h). */
static void test_handoffs_under_pubsub_kills(void **state)
{
    (void)state;
    hl_handoffs_under_pubsub_kills(fx.server, hl_new_write_lock,
                                   "w-killed-handoffs");
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_write_release_hands_the_lock_over),
        T(test_last_read_release_hands_the_lock_over),
        T(test_our_readers_beside_a_writer_do_not_stop_its_grant),
        T(test_java_waiter_beside_our_readers_is_told),
        T(test_our_readers_sleep_through_promised_handoffs),
        T(test_java_waiter_beside_promised_handoffs_is_told),
        T(test_grant_record_goes_with_the_next_hold),
        T(test_line_and_places_kept_together),
        T(test_lost_grant_message_is_claimed),
        T(test_gone_writer_gives_its_grant_back),
        T(test_dead_client_grant_runs_out_with_its_place),
        T(test_wake_ups_both_ways_beside_java),
        T(test_java_waiter_is_told_not_passed_over),
        T(test_java_waiter_beside_a_dead_first_client_is_told),
        T(test_handoffs_under_pubsub_kills),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
