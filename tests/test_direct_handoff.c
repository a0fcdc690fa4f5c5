/* The reentrant lock's direct hand-off against a real redis-server: a
 * release gives the lock outright to the wish of the first waiting
 * client, whose waiter then holds without an acquire of its own.  Each
 * way the hand-off can go wrong has its test: the grant's message lost
 * (the waiter's next attempt claims the grant, counted once), the waiter
 * gone before it hears of the grant (its withdraw gives the grant back),
 * the waiting client dead (the grant lasts no longer than its place),
 * the waiter holding longer than its place lasted (a renewal comes first),
 * and connections killed under contention (no two holders at once). */
/* ctest-timeout: 120 */
#include <stdatomic.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

/* Each test's server; see hl_lock_fixture. */
static hl_lock_fixture fx;

#define OWNER 7

/* The wish client_id recorded on the lock name; see hl_read_wish. */
static hl_wish read_wish(const char *name, const char *client_id)
{
    return hl_read_wish(fx.server, &hl_lock_line_keys, name, client_id);
}

static hl_wish expect_wish(const char *name, hilock_client *c,
                           uint64_t owner)
{
    return hl_expect_wish(fx.server, &hl_lock_line_keys, name, c, owner);
}

/* What a release does for a wish, done by hand, without the message that
 * would tell its client: the message is lost.  The lock's holder (a
 * Redisson-shaped hold) goes, and the wish's field holds for pexpire_ms. */
static void grant_unheard(const char *name, const char *client_id,
                          const hl_wish *w, long long pexpire_ms)
{
    char ms[24];

    assert_int_equal(hl_raw_int(fx.server, "DEL", name, (char *)NULL), 1);
    assert_int_equal(
        hl_raw_int(fx.server, "HSET", name, w->field, "1", (char *)NULL), 1);
    snprintf(ms, sizeof ms, "%lld", pexpire_ms);
    assert_int_equal(
        hl_raw_int(fx.server, "PEXPIRE", name, ms, (char *)NULL), 1);
    hl_grant_wish_unheard(fx.server, &hl_lock_line_keys, name, client_id, w);
}

/* ---- the hand-off ------------------------------------------------------- */


/* The release is the one script between the holder letting go and the
 * waiter holding: no acquire of the waiter's.  The grant lasts on the
 * server no longer than the waiter's place (2 s here, where the lease is
 * 30 s), so its client's lease is renewed before that runs out, and the
 * waiter holds on past it without a loss.  Before direct hand-offs, the
 * woken waiter sent an acquire: 2 scripts. */
static void test_release_hands_the_lock_over(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 2000};
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_lock *lh = hl_new_lock(h, "handoff");
    hilock_lock *lw = hl_new_lock(w, "handoff");
    static hl_acquire_rec rec;
    static hl_lost_rec lost;
    hl_value_rec rel;
    char field[64];

    (void)state;
    hl_lost_rec_init(&lost, w);
    hl_value_rec_init(&rel);
    assert_status(hilock_lock_set_lost_callback(lw, hl_record_lost, &lost),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    hl_wish before_wish = expect_wish("handoff", w, OWNER);
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
    snprintf(field, sizeof field, "%s:%d", hilock_client_id(w), OWNER);
    assert_int_equal(hl_hold_of(fx.server, "handoff", field), 1);
    long long ttl = hl_raw_pttl(fx.server, "handoff");
    if (ttl <= 0 || ttl > 2000)
        fail_msg("the grant lasts %lld ms on the server, where the "
                 "waiter's place lasted at most 2000",
                 ttl);
    assert_int_equal(read_wish("handoff", hilock_client_id(w)).kind, 'g');

    /* Renewed before the place would have run out, and held past it. */
    if (!hl_wait_pttl_above(fx.server, "handoff", 2000, hl_widen(2000)))
        fail_msg("no renewal before the grant's expiry");
    while (hl_now_ms() < released_at + 2500)
        hl_sleep_ms(50);
    assert_int_equal(atomic_load(&lost.calls), 0);
    assert_false(hilock_lock_owner_lost(lw, OWNER));
    assert_int_equal(hl_hold_of(fx.server, "handoff", field), 1);

    assert_status(hilock_lock_release_async(lw, OWNER, hl_record_value, &rel),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
    assert_int_equal(hl_raw_exists(fx.server, "handoff"), 0);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

/* The grant's message is lost: the waiter's next attempt, which it makes
 * within a third of its waiter timeout, finds the grant made for its
 * wish and takes it, counted once and for the whole lease from then. */
static void test_lost_grant_message_is_claimed(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 3000};
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_lock *lw = hl_new_lock(w, "unheard");
    static hl_acquire_rec rec;
    hl_value_rec count;

    (void)state;
    hl_value_rec_init(&count);
    hl_java_hold(fx.server, "unheard");
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    hl_wish wi = expect_wish("unheard", w, OWNER);
    long long before = hl_scripts_run(fx.server);
    grant_unheard("unheard", hilock_client_id(w), &wi, 3000);

    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(rec.got.hold_count, 1);
    /* The one attempt that found the grant: no second hold to take
     * back. */
    assert_int_equal(hl_scripts_run(fx.server) - before, 1);
    assert_int_equal(hl_hold_of(fx.server, "unheard", wi.field), 1);
    assert_int_equal(read_wish("unheard", hilock_client_id(w)).kind, 0);
    /* The claim set the whole lease. */
    assert_true(hl_raw_pttl(fx.server, "unheard") > 3000);
    assert_status(hilock_lock_hold_count_async(lw, OWNER, hl_record_value,
                                               &count),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&count, HILOCK_OK), 1);
    hl_free_lock(lw);
    hl_free_client(w);
}

/* The waiter is cancelled before it hears of a grant made for it (its
 * message lost, its next attempt 20 s away): its withdraw gives the grant
 * back, and the next client in line gets the lock long before the 30 s
 * the grant would last. */
static void test_gone_waiter_gives_its_grant_back(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 60000};
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_client *y = hl_new_client(fx.server, NULL);
    hilock_lock *lw = hl_new_lock(w, "given-back");
    hilock_lock *ly = hl_new_lock(y, "given-back");
    static hl_acquire_rec rw, ry;

    (void)state;
    hl_java_hold(fx.server, "given-back");
    uint64_t id = 0;
    hl_wait_in_line(w, lw, OWNER, &rw, &id);
    hl_wait_in_line(y, ly, OWNER, &ry, NULL);
    hl_wish wi = expect_wish("given-back", w, OWNER);
    grant_unheard("given-back", hilock_client_id(w), &wi, 30000);

    assert_status(hilock_lock_cancel(lw, id), HILOCK_OK);
    assert_status(hl_expect_acquire(&rw), HILOCK_ECANCELED);
    int64_t gone_at = hl_now_ms();
    assert_status(hl_expect_acquire(&ry), HILOCK_OK);
    print_message("    the next client got the lock %lld ms after the "
                  "waiter gave up\n",
                  (long long)(ry.at_ms - gone_at));
    assert_int_equal(hl_hold_of(fx.server, "given-back", wi.field), 0);
    hl_free_lock(ly);
    hl_free_lock(lw);
    hl_free_client(y);
    hl_free_client(w);
}

/* A client that recorded a wish and died: the release grants it the lock,
 * for no longer than its place has left (3 s, where the lease is 30 s),
 * and the next client in line, as any other library's waiter retrying at
 * the lock's ttl, gets the lock when that runs out. */
#define DEAD_CLIENT "5d1e0b3a-0c4f-4e1b-8a2d-7f6e5d4c3b2a"
#define PLACE_MS 3000

static void test_dead_client_grant_runs_out_with_its_place(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *y = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_lock(h, "dead-wish");
    hilock_lock *ly = hl_new_lock(y, "dead-wish");
    static hl_acquire_rec ry;
    char at[32];

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    snprintf(at, sizeof at, "%lld",
             hl_raw_server_ms(fx.server) + PLACE_MS);
    (void)hl_raw_int(fx.server, "RPUSH", "hilock_lock_line:{dead-wish}",
                     DEAD_CLIENT, (char *)NULL);
    (void)hl_raw_int(fx.server, "ZADD", "hilock_lock_alive:{dead-wish}", at,
                     DEAD_CLIENT, (char *)NULL);
    (void)hl_raw_int(fx.server, "HSET", "hilock_lock_want:{dead-wish}",
                     DEAD_CLIENT,
                     "w " DEAD_CLIENT ":1 30000 " DEAD_CLIENT ":1",
                     (char *)NULL);
    hl_wait_in_line(y, ly, OWNER, &ry, NULL);

    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_int_equal(hl_hold_of(fx.server, "dead-wish", DEAD_CLIENT ":1"), 1);
    long long ttl = hl_raw_pttl(fx.server, "dead-wish");
    if (ttl <= 0 || ttl > PLACE_MS)
        fail_msg("the dead client's grant lasts %lld ms", ttl);
    assert_status(hl_expect_acquire(&ry), HILOCK_OK);
    print_message("    dead client's grant: the next client got the lock "
                  "%lld ms after the release\n",
                  (long long)(ry.at_ms - released_at));
    assert_int_equal(hl_hold_of(fx.server, "dead-wish", DEAD_CLIENT ":1"), 0);
    hl_free_lock(ly);
    hl_free_lock(lh);
    hl_free_client(y);
    hl_free_client(h);
}

/* ---- beside Redisson's clients -------------------------------------------- */

/* Redisson's tryLock attempt, by hand: the lock taken for HL_JAVA_FIELD when
 * free; else its ttl. */
static long long java_attempt(const char *name)
{
    if (hl_raw_exists(fx.server, name) == 0) {
        hl_java_hold(fx.server, name);
        return -1;
    }
    return hl_raw_pttl(fx.server, name);
}

/* Our release hands the lock to our waiting client while nobody listens
 * on Redisson's channel, so a Java waiter that comes then finds it held;
 * the release of that client, with nobody of ours in line, tells
 * Redisson's channel, and the Java waiter takes the lock.  Its release
 * ("0" there) wakes our next waiter, whose wish then goes with its
 * grant. */
static void test_wake_ups_both_ways_beside_java(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_lock(h, "mixed-handoff");
    hilock_lock *lw = hl_new_lock(w, "mixed-handoff");
    static hl_acquire_rec rec, again;
    hl_value_rec rel;
    char msg[16];

    (void)state;
    hl_value_rec_init(&rel);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    (void)expect_wish("mixed-handoff", w, OWNER);
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 1);
    hl_plain_sub *java =
        hl_plain_sub_open(fx.server, "redisson_lock__channel:{mixed-handoff}");
    assert_true(java_attempt("mixed-handoff") > 0);

    assert_status(hilock_lock_release_async(lw, OWNER, hl_record_value, &rel),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
    if (!hl_plain_sub_next(java, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the Java waiter heard no release");
    assert_int_equal(java_attempt("mixed-handoff"), -1);

    hl_wait_in_line(w, lw, OWNER, &again, NULL);
    (void)expect_wish("mixed-handoff", w, OWNER);
    assert_int_equal(hl_raw_int(fx.server, "DEL", "mixed-handoff",
                                (char *)NULL),
                     1);
    (void)hl_raw_int(fx.server, "PUBLISH",
                     "redisson_lock__channel:{mixed-handoff}", "0",
                     (char *)NULL);
    assert_status(hl_expect_acquire(&again), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 1);
    assert_int_equal(read_wish("mixed-handoff", hilock_client_id(w)).kind, 0);
    hl_plain_sub_close(java);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

/* A Java waiter listens on Redisson's channel: our release grants no wish
 * then, or grant after grant could keep the lock from the Java waiter
 * for as long as our clients keep wishing.  It promises the lock to the
 * client in line and tells Redisson's channel, and the Java waiter finds
 * the lock free, as before hand-offs were.  The wish is a dead client's,
 * whose attempt never comes, so that nothing races the Java waiter's. */
static void test_java_waiter_is_told_not_passed_over(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_lock(h, "java-beside");
    char at[32], next[64], msg[16];

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(fx.server) + 30000);
    (void)hl_raw_int(fx.server, "RPUSH", "hilock_lock_line:{java-beside}",
                     DEAD_CLIENT, (char *)NULL);
    (void)hl_raw_int(fx.server, "ZADD", "hilock_lock_alive:{java-beside}", at,
                     DEAD_CLIENT, (char *)NULL);
    (void)hl_raw_int(fx.server, "HSET", "hilock_lock_want:{java-beside}",
                     DEAD_CLIENT,
                     "w " DEAD_CLIENT ":1 30000 " DEAD_CLIENT ":1",
                     (char *)NULL);
    hl_plain_sub *java =
        hl_plain_sub_open(fx.server, "redisson_lock__channel:{java-beside}");

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_int_equal(hl_hold_of(fx.server, "java-beside", DEAD_CLIENT ":1"),
                     0);
    assert_true(hl_raw_bulk(fx.server, next, sizeof next, "GET",
                            "hilock_lock_next:{java-beside}", (char *)NULL));
    assert_string_equal(next, DEAD_CLIENT);
    if (!hl_plain_sub_next(java, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the Java waiter heard no release");
    assert_int_equal(java_attempt("java-beside"), -1);
    hl_plain_sub_close(java);
    hl_free_lock(lh);
    hl_free_client(h);
}

/* ---- under faults ------------------------------------------------------- */

/* Grants go out unheard while pub/sub connections are killed, and are
 * claimed, or given back by waiters that gave up (handoff_faults.h). */
static void test_handoffs_under_pubsub_kills(void **state)
{
    (void)state;
    hl_handoffs_under_pubsub_kills(fx.server, hl_new_lock, "killed-handoffs");
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_release_hands_the_lock_over),
        T(test_lost_grant_message_is_claimed),
        T(test_gone_waiter_gives_its_grant_back),
        T(test_dead_client_grant_runs_out_with_its_place),
        T(test_wake_ups_both_ways_beside_java),
        T(test_java_waiter_is_told_not_passed_over),
        T(test_handoffs_under_pubsub_kills),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
