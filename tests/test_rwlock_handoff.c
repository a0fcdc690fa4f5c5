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
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

/* Each test's server; see hl_lock_fixture. */
static hl_lock_fixture fx;

#define OWNER 7
#define READER 9

/* A Redisson writer's field. */
#define JAVA_WRITE_FIELD HL_JAVA_FIELD ":write"

static hl_wish read_wish(const char *name, const char *client_id)
{
    return hl_read_wish(fx.server, &hl_rwlock_line_keys, name, client_id);
}

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

/* owner's release of one hold, waited for; its value is what
 * hilock_lock_release_async reports. */
static int64_t release_owner(hilock_lock *lock, uint64_t owner)
{
    hl_value_rec rel;

    hl_value_rec_init(&rel);
    assert_status(hilock_lock_release_async(lock, owner, hl_record_value,
                                            &rel),
                  HILOCK_OK);
    return hl_expect_value(&rel, HILOCK_OK);
}

/* A write hold as Redisson's write lock takes it, for 30 s. */
static void java_write_hold(const char *name)
{
    assert_int_equal(hl_raw_int(fx.server, "HSET", name, "mode", "write",
                                JAVA_WRITE_FIELD, "1", (char *)NULL),
                     2);
    assert_int_equal(
        hl_raw_int(fx.server, "PEXPIRE", name, "30000", (char *)NULL), 1);
}

/* What a release does for a writer's wish, done by hand, without the
 * message that would tell its client: the message is lost.  The lock's
 * holder (a Redisson-shaped hold) goes, and the wish's field holds the
 * write lock for pexpire_ms. */
static void grant_unheard(const char *name, const char *client_id,
                          const hl_wish *w, long long pexpire_ms)
{
    char wf[96], ms[24];

    snprintf(wf, sizeof wf, "%s:write", w->field);
    assert_int_equal(hl_raw_int(fx.server, "DEL", name, (char *)NULL), 1);
    assert_int_equal(hl_raw_int(fx.server, "HSET", name, "mode", "write", wf,
                                "1", (char *)NULL),
                     2);
    snprintf(ms, sizeof ms, "%lld", pexpire_ms);
    assert_int_equal(
        hl_raw_int(fx.server, "PEXPIRE", name, ms, (char *)NULL), 1);
    hl_grant_wish_unheard(fx.server, &hl_rwlock_line_keys, name, client_id,
                          w);
}

/* ---- the hand-off ------------------------------------------------------- */

/* The write release is the one script between the holder letting go and
 * the waiting writer holding.  The grant lasts on the server no longer
 * than the writer's place (2 s here, where the lease is 30 s), so its
 * client's lease is renewed before that runs out, and the writer holds
 * on past it without a loss.  Before direct hand-offs, the woken writer
 * sent an acquire: 2 scripts. */
static void test_write_release_hands_the_lock_over(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 2000};
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_lock *lh = hl_new_write_lock(h, "wh");
    hilock_lock *lw = hl_new_write_lock(w, "wh");
    static hl_acquire_rec rec;
    static hl_lost_rec lost;
    hl_value_rec rel;

    (void)state;
    hl_lost_rec_init(&lost, w);
    hl_value_rec_init(&rel);
    assert_status(hilock_lock_set_lost_callback(lw, hl_record_lost, &lost),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    hl_wish before_wish = expect_wish("wh", w, OWNER);
    assert_int_equal(before_wish.lease_ms, 30000);
    /* Alone in line, so told it is first: it listens on Redisson's
     * channel, and the wish says so, which no other listener does. */
    assert_true(before_wish.first);

    long long before = hl_scripts_run(fx.server);
    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(rec.got.hold_count, 1);
    assert_int_equal(hl_scripts_run(fx.server) - before, 1);
    assert_int_equal(hl_handed_to(w), 1);
    assert_int_equal(write_hold_of("wh", w, OWNER), 1);
    expect_mode("wh", "write");
    long long ttl = hl_raw_pttl(fx.server, "wh");
    if (ttl <= 0 || ttl > 2000)
        fail_msg("the grant lasts %lld ms on the server, where the "
                 "writer's place lasted at most 2000",
                 ttl);
    assert_int_equal(read_wish("wh", hilock_client_id(w)).kind, 'g');

    /* Renewed before the place would have run out, and held past it. */
    if (!hl_wait_pttl_above(fx.server, "wh", 2000, hl_widen(2000)))
        fail_msg("no renewal before the grant's expiry");
    while (hl_now_ms() < released_at + 2500)
        hl_sleep_ms(50);
    assert_int_equal(atomic_load(&lost.calls), 0);
    assert_false(hilock_lock_owner_lost(lw, OWNER));
    assert_int_equal(write_hold_of("wh", w, OWNER), 1);

    /* The grantee's release frees the lock, and drops the spent grant. */
    assert_status(hilock_lock_release_async(lw, OWNER, hl_record_value, &rel),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
    assert_int_equal(hl_raw_exists(fx.server, "wh"), 0);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

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
    assert_int_equal(release_owner(lw, OWNER), 0);
    assert_int_equal(hl_raw_exists(fx.server, "rh"), 0);
    hl_free_lock(lw);
    hl_free_lock(lr);
    hl_free_client(w);
    hl_free_client(r);
}

/* A reader of ours waits beside the writer, listening on Redisson's
 * channel, where the server cannot tell it from a Java waiter: the
 * release promises the lock to the writer instead of granting it, and
 * announces.  The reader, woken, is refused while the writer waits, the
 * writer takes the lock with its attempt, and its release, the writers'
 * line empty, lets the reader in. */
static void test_readers_beside_a_writer_get_a_promise(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, NULL);
    hilock_client *r = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_write_lock(h, "rw-beside");
    hilock_lock *lw = hl_new_write_lock(w, "rw-beside");
    hilock_lock *lr = hl_new_read_lock(r, "rw-beside");
    static hl_acquire_rec wrec, rrec;

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &wrec, NULL);
    (void)expect_wish("rw-beside", w, OWNER);
    hl_wait_in_line(r, lr, READER, &rrec, NULL);

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&wrec), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 0);
    expect_mode("rw-beside", "write");
    /* The reader is still waiting. */
    hl_expect_idle(r, lr, 1);
    assert_int_equal(atomic_load(&rrec.calls), 0);

    assert_int_equal(release_owner(lw, OWNER), 0);
    assert_status(hl_expect_acquire(&rrec), HILOCK_OK);
    expect_mode("rw-beside", "read");
    assert_int_equal(release_owner(lr, READER), 0);
    hl_free_lock(lr);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(r);
    hl_free_client(w);
    hl_free_client(h);
}

/* The grant's message is lost: the writer's next attempt, which it makes
 * within a third of its waiter timeout, finds the grant made for its wish
 * and takes it, counted once and for the whole lease from then. */
static void test_lost_grant_message_is_claimed(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 3000};
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_lock *lw = hl_new_write_lock(w, "w-unheard");
    static hl_acquire_rec rec;
    hl_value_rec count;

    (void)state;
    hl_value_rec_init(&count);
    java_write_hold("w-unheard");
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    hl_wish wi = expect_wish("w-unheard", w, OWNER);
    long long before = hl_scripts_run(fx.server);
    grant_unheard("w-unheard", hilock_client_id(w), &wi, 3000);

    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(rec.got.hold_count, 1);
    /* The one attempt that found the grant: no second hold to take
     * back. */
    assert_int_equal(hl_scripts_run(fx.server) - before, 1);
    assert_int_equal(write_hold_of("w-unheard", w, OWNER), 1);
    assert_int_equal(read_wish("w-unheard", hilock_client_id(w)).kind, 0);
    /* The claim set the whole lease. */
    assert_true(hl_raw_pttl(fx.server, "w-unheard") > 3000);
    assert_status(hilock_lock_hold_count_async(lw, OWNER, hl_record_value,
                                               &count),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&count, HILOCK_OK), 1);
    hl_free_lock(lw);
    hl_free_client(w);
}

/* The writer is cancelled before it hears of a grant made for it (its
 * message lost, its next attempt 20 s away): its withdraw gives the grant
 * back, and the next writer client in line gets the lock long before the
 * 30 s the grant would last. */
static void test_gone_writer_gives_its_grant_back(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 60000};
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_client *y = hl_new_client(fx.server, NULL);
    hilock_lock *lw = hl_new_write_lock(w, "w-given-back");
    hilock_lock *ly = hl_new_write_lock(y, "w-given-back");
    static hl_acquire_rec rw, ry;

    (void)state;
    java_write_hold("w-given-back");
    uint64_t id = 0;
    hl_wait_in_line(w, lw, OWNER, &rw, &id);
    hl_wait_in_line(y, ly, OWNER, &ry, NULL);
    hl_wish wi = expect_wish("w-given-back", w, OWNER);
    grant_unheard("w-given-back", hilock_client_id(w), &wi, 30000);

    assert_status(hilock_lock_cancel(lw, id), HILOCK_OK);
    assert_status(hl_expect_acquire(&rw), HILOCK_ECANCELED);
    int64_t gone_at = hl_now_ms();
    assert_status(hl_expect_acquire(&ry), HILOCK_OK);
    print_message("    the next writer got the lock %lld ms after the "
                  "first gave up\n",
                  (long long)(ry.at_ms - gone_at));
    assert_int_equal(write_hold_of("w-given-back", w, OWNER), 0);
    assert_int_equal(write_hold_of("w-given-back", y, OWNER), 1);
    hl_free_lock(ly);
    hl_free_lock(lw);
    hl_free_client(y);
    hl_free_client(w);
}

/* A writer client that recorded a wish and died: the release grants it
 * the lock, for no longer than its place has left (3 s, where the lease
 * is 30 s), and the next writer client in line gets the lock when that
 * runs out. */
#define DEAD_CLIENT "5d1e0b3a-0c4f-4e1b-8a2d-7f6e5d4c3b2a"
#define PLACE_MS 3000

static void test_dead_client_grant_runs_out_with_its_place(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *y = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_write_lock(h, "w-dead-wish");
    hilock_lock *ly = hl_new_write_lock(y, "w-dead-wish");
    static hl_acquire_rec ry;
    char at[32];

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    snprintf(at, sizeof at, "%lld",
             hl_raw_server_ms(fx.server) + PLACE_MS);
    (void)hl_raw_int(fx.server, "RPUSH", "hilock_rwlock_line:{w-dead-wish}",
                     DEAD_CLIENT, (char *)NULL);
    (void)hl_raw_int(fx.server, "ZADD", "hilock_rwlock_writers:{w-dead-wish}",
                     at, DEAD_CLIENT, (char *)NULL);
    (void)hl_raw_int(fx.server, "HSET", "hilock_rwlock_want:{w-dead-wish}",
                     DEAD_CLIENT,
                     "w " DEAD_CLIENT ":1 30000 " DEAD_CLIENT ":1",
                     (char *)NULL);
    hl_wait_in_line(y, ly, OWNER, &ry, NULL);

    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_int_equal(
        hl_hold_of(fx.server, "w-dead-wish", DEAD_CLIENT ":1:write"), 1);
    long long ttl = hl_raw_pttl(fx.server, "w-dead-wish");
    if (ttl <= 0 || ttl > PLACE_MS)
        fail_msg("the dead client's grant lasts %lld ms", ttl);
    assert_status(hl_expect_acquire(&ry), HILOCK_OK);
    print_message("    dead client's grant: the next writer got the lock "
                  "%lld ms after the release\n",
                  (long long)(ry.at_ms - released_at));
    assert_int_equal(
        hl_hold_of(fx.server, "w-dead-wish", DEAD_CLIENT ":1:write"), 0);
    hl_free_lock(ly);
    hl_free_lock(lh);
    hl_free_client(y);
    hl_free_client(h);
}

/* ---- beside Redisson's clients -------------------------------------------- */

/* Redisson's write tryLock, by hand: the lock taken for JAVA_WRITE_FIELD
 * when free (-1); else its ttl. */
static long long java_write_attempt(const char *name)
{
    if (hl_raw_exists(fx.server, name) == 0) {
        java_write_hold(name);
        return -1;
    }
    return hl_raw_pttl(fx.server, name);
}

/* Our release hands the lock to our waiting writer while nobody listens
 * on Redisson's channel, so a Java waiter that comes then finds it held;
 * the release of that writer, with nobody of ours in line, tells
 * Redisson's channel, and the Java waiter takes the lock.  Its release ("1" there)
 * wakes our next writer, which takes the lock with an attempt of its own
 * and drops its wish. */
static void test_wake_ups_both_ways_beside_java(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_write_lock(h, "w-mixed");
    hilock_lock *lw = hl_new_write_lock(w, "w-mixed");
    static hl_acquire_rec rec, again;
    hl_value_rec rel;
    char msg[16];

    (void)state;
    hl_value_rec_init(&rel);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    (void)expect_wish("w-mixed", w, OWNER);
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 1);
    hl_plain_sub *java =
        hl_plain_sub_open(fx.server, "redisson_rwlock:{w-mixed}");
    assert_true(java_write_attempt("w-mixed") > 0);

    assert_status(hilock_lock_release_async(lw, OWNER, hl_record_value, &rel),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
    if (!hl_plain_sub_next(java, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the Java waiter heard no release");
    assert_int_equal(java_write_attempt("w-mixed"), -1);

    hl_wait_in_line(w, lw, OWNER, &again, NULL);
    (void)expect_wish("w-mixed", w, OWNER);
    assert_int_equal(hl_raw_int(fx.server, "DEL", "w-mixed", (char *)NULL),
                     1);
    (void)hl_raw_int(fx.server, "PUBLISH", "redisson_rwlock:{w-mixed}", "1",
                     (char *)NULL);
    assert_status(hl_expect_acquire(&again), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 1);
    assert_int_equal(read_wish("w-mixed", hilock_client_id(w)).kind, 0);
    hl_plain_sub_close(java);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

/* A Java waiter listens on Redisson's channel: our release grants no
 * writer's wish then (see the reentrant lock's
 * test_java_waiter_is_told_not_passed_over).  It promises the lock and
 * tells the channel, and the Java waiter finds the lock free.  The wish
 * is a dead client's, so that nothing races the Java waiter's attempt. */
static void test_java_waiter_is_told_not_passed_over(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_write_lock(h, "w-java-beside");
    char at[32], next[64], msg[16];

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(fx.server) + 30000);
    (void)hl_raw_int(fx.server, "RPUSH",
                     "hilock_rwlock_line:{w-java-beside}", DEAD_CLIENT,
                     (char *)NULL);
    (void)hl_raw_int(fx.server, "ZADD",
                     "hilock_rwlock_writers:{w-java-beside}", at,
                     DEAD_CLIENT, (char *)NULL);
    (void)hl_raw_int(fx.server, "HSET", "hilock_rwlock_want:{w-java-beside}",
                     DEAD_CLIENT,
                     "w " DEAD_CLIENT ":1 30000 " DEAD_CLIENT ":1",
                     (char *)NULL);
    hl_plain_sub *java =
        hl_plain_sub_open(fx.server, "redisson_rwlock:{w-java-beside}");

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_int_equal(
        hl_hold_of(fx.server, "w-java-beside", DEAD_CLIENT ":1:write"), 0);
    assert_true(hl_raw_bulk(fx.server, next, sizeof next, "GET",
                            "hilock_rwlock_next:{w-java-beside}",
                            (char *)NULL));
    assert_string_equal(next, DEAD_CLIENT);
    if (!hl_plain_sub_next(java, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the Java waiter heard no release");
    assert_int_equal(java_write_attempt("w-java-beside"), -1);
    hl_plain_sub_close(java);
    hl_free_lock(lh);
    hl_free_client(h);
}

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
        T(test_readers_beside_a_writer_get_a_promise),
        T(test_lost_grant_message_is_claimed),
        T(test_gone_writer_gives_its_grant_back),
        T(test_dead_client_grant_runs_out_with_its_place),
        T(test_wake_ups_both_ways_beside_java),
        T(test_java_waiter_is_told_not_passed_over),
        T(test_handoffs_under_pubsub_kills),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
