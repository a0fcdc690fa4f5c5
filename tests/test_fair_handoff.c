/* The fair lock's direct hand-off against a real redis-server: a release
 * gives the lock outright to the head of the line when that waiter
 * recorded a wish, and the waiter then holds without an acquire of its
 * own.  As for the reentrant lock (test_direct_handoff.c), each way the
 * hand-off can go wrong has its test: the grant's message lost (the
 * waiter's next attempt claims it), the waiter gone before it hears of
 * the grant (its withdraw gives the grant back and the next in line is
 * woken), the waiter dead (the grant lasts no longer than its place), a
 * Java waiter at the head (woken as Redisson's release would, never
 * granted), and pub/sub connections killed under contention (no two
 * holders at once). */
/* ctest-timeout: 120 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/fair.h"
#include "hilock/lock.h"
#include "support/fixture.h"
#include "support/handoff.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

/* Each test's server; see hl_lock_fixture. */
static hl_lock_fixture fx;

#define OWNER 7
/* A second owner of a handle whose calling thread holds: no thread's. */
#define RIDER 1007

/* A wish or a grant as the server keeps it under a waiter's field. */
typedef struct wish {
    char kind; /* 'w' wish, 'g' granted, 0 none */
    char nonce[64];
    long long lease_ms; /* of a wish */
} wish;

static void field_of(hilock_client *c, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%d", hilock_client_id(c), OWNER);
}

static wish read_wish(const char *name, const char *field)
{
    char key[128], raw[256];
    wish w = {0};

    snprintf(key, sizeof key, "hilock_fair_want:{%s}", name);
    if (!hl_raw_bulk(fx.server, raw, sizeof raw, "HGET", key, field,
                     (char *)NULL))
        return w;
    if (raw[0] == 'w' &&
        sscanf(raw, "w %63s %lld", w.nonce, &w.lease_ms) == 2)
        w.kind = 'w';
    else if (raw[0] == 'g' && sscanf(raw, "g %63s", w.nonce) == 1)
        w.kind = 'g';
    else
        fail_msg("the wish of %s reads \"%s\"", field, raw);
    return w;
}

static wish expect_wish(const char *name, hilock_client *c)
{
    char field[64];
    field_of(c, field, sizeof field);
    wish w = read_wish(name, field);
    if (w.kind != 'w')
        fail_msg("no wish recorded for the waiting client");
    return w;
}

static void key_of(char *out, size_t cap, const char *prefix,
                   const char *name)
{
    snprintf(out, cap, "%s:{%s}", prefix, name);
}

/* What a release does for a wish, done by hand, without the message that
 * would tell its waiter: the message is lost.  The lock's holder goes,
 * and the wish's field holds for pexpire_ms. */
static void grant_unheard(const char *name, const char *field, const wish *w,
                          long long pexpire_ms)
{
    char key[128], ms[24], granted[96];

    assert_int_equal(hl_raw_int(fx.server, "DEL", name, (char *)NULL), 1);
    assert_int_equal(
        hl_raw_int(fx.server, "HSET", name, field, "1", (char *)NULL), 1);
    snprintf(ms, sizeof ms, "%lld", pexpire_ms);
    assert_int_equal(
        hl_raw_int(fx.server, "PEXPIRE", name, ms, (char *)NULL), 1);
    key_of(key, sizeof key, "hilock_fair_want", name);
    snprintf(granted, sizeof granted, "g %s", w->nonce);
    (void)hl_raw_int(fx.server, "HSET", key, field, granted, (char *)NULL);
    key_of(key, sizeof key, "redisson_lock_queue", name);
    assert_int_equal(
        hl_raw_int(fx.server, "LREM", key, "1", field, (char *)NULL), 1);
    key_of(key, sizeof key, "redisson_lock_timeout", name);
    (void)hl_raw_int(fx.server, "ZREM", key, field, (char *)NULL);
    key_of(key, sizeof key, "hilock_fair_alive", name);
    (void)hl_raw_int(fx.server, "ZREM", key, field, (char *)NULL);
}







/* ---- the hand-off ------------------------------------------------------- */

/* The release is the one script between the holder letting go and the
 * head of the line holding: no acquire of the waiter's.  The grant lasts
 * on the server no longer than the waiter's place (2 s, where the lease
 * is 30 s), so its client renews it before that runs out and holds on
 * past it.  The waiter's release then clears its grant.  Before the
 * direct hand-off, the woken waiter sent an acquire: 2 scripts. */
static void test_release_hands_the_fair_lock_over(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 2000};
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_lock *lh = hl_new_fair_lock(h, "fair-handoff");
    hilock_lock *lw = hl_new_fair_lock(w, "fair-handoff");
    static hl_acquire_rec rec;
    static hl_lost_rec lost;
    hl_value_rec rel;
    char field[64];

    (void)state;
    field_of(w, field, sizeof field);
    hl_lost_rec_init(&lost, w);
    hl_value_rec_init(&rel);
    assert_status(hilock_lock_set_lost_callback(lw, hl_record_lost, &lost),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    wish before_wish = expect_wish("fair-handoff", w);
    assert_int_equal(before_wish.lease_ms, 30000);

    long long before = hl_scripts_run(fx.server);
    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(rec.got.hold_count, 1);
    assert_int_equal(hl_scripts_run(fx.server) - before, 1);
    assert_int_equal(hl_handed_to(w), 1);
    assert_int_equal(hl_hold_of(fx.server, "fair-handoff", field), 1);
    long long ttl = hl_raw_pttl(fx.server, "fair-handoff");
    if (ttl <= 0 || ttl > 2000)
        fail_msg("the grant lasts %lld ms on the server, where the "
                 "waiter's place lasted at most 2000",
                 ttl);
    wish granted = read_wish("fair-handoff", field);
    assert_int_equal(granted.kind, 'g');
    assert_string_equal(granted.nonce, before_wish.nonce);
    assert_int_equal(hl_raw_int(fx.server, "LLEN",
                                "redisson_lock_queue:{fair-handoff}",
                                (char *)NULL),
                     0);

    /* Renewed before the place would have run out, and held past it. */
    if (!hl_wait_pttl_above(fx.server, "fair-handoff", 2000, hl_widen(2000)))
        fail_msg("no renewal before the grant's expiry");
    while (hl_now_ms() < released_at + 2500)
        hl_sleep_ms(50);
    assert_int_equal(atomic_load(&lost.calls), 0);
    assert_false(hilock_lock_owner_lost(lw, OWNER));
    assert_int_equal(hl_hold_of(fx.server, "fair-handoff", field), 1);

    assert_status(hilock_lock_release_async(lw, OWNER, hl_record_value, &rel),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
    assert_int_equal(hl_raw_exists(fx.server, "fair-handoff"), 0);
    assert_int_equal(read_wish("fair-handoff", field).kind, 0);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

/* The grant's message is lost: the waiter's next attempt, within a third
 * of its waiter timeout, finds the grant made for its wish and takes it,
 * counted once and for the whole lease from then. */
static void test_lost_grant_message_is_claimed(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 3000};
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_lock *lw = hl_new_fair_lock(w, "fair-unheard");
    static hl_acquire_rec rec;
    hl_value_rec count;
    char field[64];

    (void)state;
    field_of(w, field, sizeof field);
    hl_value_rec_init(&count);
    hl_java_hold(fx.server, "fair-unheard");
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    wish wi = expect_wish("fair-unheard", w);
    long long before = hl_scripts_run(fx.server);
    grant_unheard("fair-unheard", field, &wi, 3000);

    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(rec.got.hold_count, 1);
    /* The one attempt that found the grant. */
    assert_int_equal(hl_scripts_run(fx.server) - before, 1);
    assert_int_equal(hl_hold_of(fx.server, "fair-unheard", field), 1);
    assert_int_equal(read_wish("fair-unheard", field).kind, 0);
    assert_true(hl_raw_pttl(fx.server, "fair-unheard") > 3000);
    assert_status(hilock_lock_hold_count_async(lw, OWNER, hl_record_value,
                                               &count),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&count, HILOCK_OK), 1);
    hl_free_lock(lw);
    hl_free_client(w);
}

/* The waiter is cancelled before it hears of a grant made for it (its
 * message lost, its next attempt 20 s away): its withdraw gives the grant
 * back and wakes the next in line, which gets the lock long before the
 * 30 s the grant would last. */
static void test_gone_waiter_gives_its_grant_back(void **state)
{
    const hl_client_opts wopts = {.waiter_ms = 60000};
    hilock_client *w = hl_new_client(fx.server, &wopts);
    hilock_client *y = hl_new_client(fx.server, &wopts);
    hilock_lock *lw = hl_new_fair_lock(w, "fair-given-back");
    hilock_lock *ly = hl_new_fair_lock(y, "fair-given-back");
    static hl_acquire_rec rw, ry;
    char field[64];

    (void)state;
    field_of(w, field, sizeof field);
    hl_java_hold(fx.server, "fair-given-back");
    uint64_t id = 0;
    hl_wait_in_line(w, lw, OWNER, &rw, &id);
    hl_wait_in_line(y, ly, OWNER, &ry, NULL);
    wish wi = expect_wish("fair-given-back", w);
    grant_unheard("fair-given-back", field, &wi, 30000);

    assert_status(hilock_lock_cancel(lw, id), HILOCK_OK);
    assert_status(hl_expect_acquire(&rw), HILOCK_ECANCELED);
    int64_t gone_at = hl_now_ms();
    assert_status(hl_expect_acquire(&ry), HILOCK_OK);
    print_message("    the next in line got the lock %lld ms after the "
                  "waiter gave up\n",
                  (long long)(ry.at_ms - gone_at));
    if (ry.at_ms - gone_at > hl_widen(5000))
        fail_msg("the next in line waited %lld ms for a grant given back",
                 (long long)(ry.at_ms - gone_at));
    assert_int_equal(hl_hold_of(fx.server, "fair-given-back", field), 0);
    assert_int_equal(read_wish("fair-given-back", field).kind, 0);
    hl_free_lock(ly);
    hl_free_lock(lw);
    hl_free_client(y);
    hl_free_client(w);
}

/* A waiter that recorded a wish and died: the release grants it the lock,
 * for no longer than its place has left (3 s, where the lease is 30 s),
 * and the next in line gets the lock when that runs out. */
#define DEAD_FIELD "5d1e0b3a-0c4f-4e1b-8a2d-7f6e5d4c3b2a:1"
#define PLACE_MS 3000

static void test_dead_waiter_grant_runs_out_with_its_place(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *y = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_fair_lock(h, "fair-dead-wish");
    hilock_lock *ly = hl_new_fair_lock(y, "fair-dead-wish");
    static hl_acquire_rec ry;
    char at[32];

    (void)state;
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(fx.server) + PLACE_MS);
    (void)hl_raw_int(fx.server, "RPUSH", "redisson_lock_queue:{fair-dead-wish}",
                     DEAD_FIELD, (char *)NULL);
    (void)hl_raw_int(fx.server, "ZADD",
                     "redisson_lock_timeout:{fair-dead-wish}", at, DEAD_FIELD,
                     (char *)NULL);
    (void)hl_raw_int(fx.server, "ZADD", "hilock_fair_alive:{fair-dead-wish}",
                     at, DEAD_FIELD, (char *)NULL);
    (void)hl_raw_int(fx.server, "HSET", "hilock_fair_want:{fair-dead-wish}",
                     DEAD_FIELD, "w 5d1e0b3a:9 30000", (char *)NULL);
    hl_wait_in_line(y, ly, OWNER, &ry, NULL);

    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_int_equal(hl_hold_of(fx.server, "fair-dead-wish", DEAD_FIELD), 1);
    long long ttl = hl_raw_pttl(fx.server, "fair-dead-wish");
    if (ttl <= 0 || ttl > PLACE_MS)
        fail_msg("the dead waiter's grant lasts %lld ms", ttl);
    assert_status(hl_expect_acquire(&ry), HILOCK_OK);
    print_message("    dead waiter's grant: the next in line got the lock "
                  "%lld ms after the release\n",
                  (long long)(ry.at_ms - released_at));
    assert_int_equal(hl_hold_of(fx.server, "fair-dead-wish", DEAD_FIELD), 0);
    hl_free_lock(ly);
    hl_free_lock(lh);
    hl_free_client(y);
    hl_free_client(h);
}

/* ---- beside Redisson's clients -------------------------------------------- */

/* A Java waiter at the head of the line records no wish: our release
 * frees the lock and wakes it on its channel, as Redisson's release
 * would.  It takes the lock (Redisson's grant, by hand), and its release
 * ("0" to the head's channel, our waiter's) wakes our waiter, whose own
 * attempt takes the lock. */
static void test_wake_ups_both_ways_beside_java(void **state)
{
    hilock_client *h = hl_new_client(fx.server, NULL);
    hilock_client *w = hl_new_client(fx.server, NULL);
    hilock_lock *lh = hl_new_fair_lock(h, "fair-mixed");
    hilock_lock *lw = hl_new_fair_lock(w, "fair-mixed");
    static hl_acquire_rec rec;
    char msg[16], at[32], field[64], channel[160];

    (void)state;
    field_of(w, field, sizeof field);
    hl_plain_sub *java = hl_plain_sub_open(
        fx.server, "redisson_lock__channel:{fair-mixed}:" HL_JAVA_FIELD);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    /* Redisson's place: the lock's ttl plus its thread's wait. */
    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(fx.server) + 330000);
    (void)hl_raw_int(fx.server, "RPUSH", "redisson_lock_queue:{fair-mixed}",
                     HL_JAVA_FIELD, (char *)NULL);
    (void)hl_raw_int(fx.server, "ZADD", "redisson_lock_timeout:{fair-mixed}",
                     at, HL_JAVA_FIELD, (char *)NULL);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    (void)expect_wish("fair-mixed", w);

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, "fair-mixed"), 0);
    if (!hl_plain_sub_next(java, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the Java waiter at the head heard no release");
    assert_string_equal(msg, "0");

    /* Redisson's grant to its head, and later its release. */
    assert_int_equal(hl_raw_int(fx.server, "LREM",
                                "redisson_lock_queue:{fair-mixed}", "1",
                                HL_JAVA_FIELD, (char *)NULL),
                     1);
    (void)hl_raw_int(fx.server, "ZREM", "redisson_lock_timeout:{fair-mixed}",
                     HL_JAVA_FIELD, (char *)NULL);
    hl_java_hold(fx.server, "fair-mixed");
    assert_int_equal(atomic_load(&rec.calls), 0);
    assert_int_equal(hl_raw_int(fx.server, "DEL", "fair-mixed", (char *)NULL),
                     1);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{fair-mixed}:%s",
             field);
    (void)hl_raw_int(fx.server, "PUBLISH", channel, "0", (char *)NULL);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 0);
    assert_int_equal(hl_hold_of(fx.server, "fair-mixed", field), 1);
    assert_int_equal(read_wish("fair-mixed", field).kind, 0);
    hl_plain_sub_close(java);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

/* ---- a waiter's attempt riding on a release ----------------------------- */

/* Owner o's async acquire on lock of client c, with lease_ms, recorded in
 * rec; returns once it was refused and waits idle on its channel. */
static void wait_idle_in_line(hilock_client *c, hilock_lock *lock, uint64_t o,
                              int64_t lease_ms, hl_acquire_rec *rec)
{
    hl_acquire_rec_init(rec, c);
    assert_status(hilock_lock_acquire_async(lock, o, HILOCK_WAIT_FOREVER,
                                            lease_ms, 0, hl_record_acquire,
                                            rec, NULL),
                  HILOCK_OK);
    hl_expect_idle(c, lock, 1);
}

/* Owner o of lock gives its hold back, and the release says it did. */
static void release_owner(hilock_lock *lock, uint64_t o)
{
    hl_value_rec rel;

    hl_value_rec_init(&rel);
    assert_status(hilock_lock_release_async(lock, o, hl_record_value, &rel),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&rel, HILOCK_OK), 0);
}

/* PUBLISH calls the server has run so far (INFO commandstats). */
static long long publishes_run(void)
{
    char info[8192];
    assert_true(hl_raw_bulk(fx.server, info, sizeof info, "INFO",
                            "commandstats", (char *)NULL));
    const char *at = strstr(info, "cmdstat_publish:calls=");
    return at ? atoll(at + strlen("cmdstat_publish:calls=")) : 0;
}

/* Two owners of one handle: the release that frees the lock carries the
 * waiting owner's attempt, which takes the lock in the same script as
 * the head of the line, with no wake-up published for it.  Before, the
 * release woke the head on its channel and the attempt was a script of
 * its own: 2 scripts and a PUBLISH.  Both for a lease of the caller's
 * (the waiter records no wish) and for the watchdog's (its attempt drops
 * its wish as it takes the lock). */
static void expect_release_carries_attempt(const char *name,
                                           int64_t lease_ms)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_fair_lock(c, name);
    static hl_acquire_rec rec;
    char field[64], line[128];

    snprintf(field, sizeof field, "%s:%d", hilock_client_id(c), RIDER);
    snprintf(line, sizeof line, "redisson_lock_queue:{%s}", name);
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    wait_idle_in_line(c, l, RIDER, lease_ms, &rec);
    if (lease_ms == HILOCK_LEASE_WATCHDOG)
        assert_int_equal(read_wish(name, field).kind, 'w');

    long long scripts = hl_scripts_run(fx.server);
    long long published = publishes_run();
    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(rec.got.hold_count, 1);
    assert_int_equal(hl_scripts_run(fx.server) - scripts, 1);
    assert_int_equal(publishes_run() - published, 0);
    assert_int_equal(hl_hold_of(fx.server, name, field), 1);
    assert_int_equal(hl_raw_int(fx.server, "LLEN", line, (char *)NULL), 0);
    assert_int_equal(read_wish(name, field).kind, 0);
    long long ttl = hl_raw_pttl(fx.server, name);
    if (ttl <= 20000)
        fail_msg("the rider's hold lasts %lld ms on the server, where its "
                 "lease is 30000",
                 ttl);

    release_owner(l, RIDER);
    assert_int_equal(hl_raw_exists(fx.server, name), 0);
    hl_free_lock(l);
    hl_free_client(c);
}

static void test_release_carries_the_next_attempt(void **state)
{
    (void)state;
    expect_release_carries_attempt("fair-ride", 30000);
}

static void test_release_carries_a_wishing_attempt(void **state)
{
    (void)state;
    expect_release_carries_attempt("fair-ride-wish", HILOCK_LEASE_WATCHDOG);
}

/* The rider guessed wrong: another client's waiter heads the line, so
 * the release hands the lock to it, and the rider's attempt, refused,
 * keeps its place behind it, without taking the lock before its turn. */
static void test_rider_behind_another_clients_waiter(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *o = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_fair_lock(c, "fair-ride-behind");
    hilock_lock *lo = hl_new_fair_lock(o, "fair-ride-behind");
    static hl_acquire_rec first, rider;
    char first_field[64], rider_field[64], line[2][64];

    (void)state;
    field_of(o, first_field, sizeof first_field);
    snprintf(rider_field, sizeof rider_field, "%s:%d", hilock_client_id(c),
             RIDER);
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    wait_idle_in_line(o, lo, OWNER, 30000, &first);
    wait_idle_in_line(c, l, RIDER, 30000, &rider);

    assert_status(hilock_lock_release(l), HILOCK_OK);
    assert_status(hl_expect_acquire(&first), HILOCK_OK);
    /* The rider's refusal came back in the release's answer: it waits
     * idle again, second no more, behind nobody but the holder. */
    hl_expect_idle(c, l, 1);
    assert_int_equal(atomic_load(&rider.calls), 0);
    assert_int_equal(hl_hold_of(fx.server, "fair-ride-behind", first_field),
                     1);
    assert_int_equal(hl_hold_of(fx.server, "fair-ride-behind", rider_field),
                     0);
    assert_int_equal(hl_raw_int(fx.server, "LLEN",
                                "redisson_lock_queue:{fair-ride-behind}",
                                (char *)NULL),
                     1);
    assert_true(hl_raw_bulk(fx.server, line[0], sizeof line[0], "LINDEX",
                            "redisson_lock_queue:{fair-ride-behind}", "0",
                            (char *)NULL));
    assert_string_equal(line[0], rider_field);

    release_owner(lo, OWNER);
    assert_status(hl_expect_acquire(&rider), HILOCK_OK);
    assert_int_equal(hl_hold_of(fx.server, "fair-ride-behind", rider_field),
                     1);
    release_owner(l, RIDER);
    assert_int_equal(hl_raw_exists(fx.server, "fair-ride-behind"), 0);
    hl_free_lock(lo);
    hl_free_lock(l);
    hl_free_client(o);
    hl_free_client(c);
}

/* ---- under faults ------------------------------------------------------- */

/* A release carrying the rider's attempt is written to a stopped server
 * and gets no answer within the command timeout: the release says
 * HILOCK_EINDOUBT, counted as done, and the rider's attempt is of unknown
 * outcome, reconciled as any.  Once the server runs again the rider
 * holds the lock exactly once, and nothing else of either is left. */
static void test_ridden_release_without_answer(void **state)
{
    const hl_client_opts opts = {.command_timeout_ms = hl_widen(300)};
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *l = hl_new_fair_lock(c, "fair-ride-stopped");
    static hl_acquire_rec rider;
    char field[64];

    (void)state;
    snprintf(field, sizeof field, "%s:%d", hilock_client_id(c), RIDER);
    assert_status(hilock_lock_try_acquire(l, 0, 30000), HILOCK_OK);
    wait_idle_in_line(c, l, RIDER, 30000, &rider);

    hl_fixture_pause(fx.server);
    int rc = hilock_lock_release(l);
    hl_fixture_resume(fx.server);
    assert_status(rc, HILOCK_EINDOUBT);
    assert_status(hl_expect_acquire(&rider), HILOCK_OK);
    assert_int_equal(rider.got.hold_count, 1);
    assert_int_equal(hl_hold_of(fx.server, "fair-ride-stopped", field), 1);
    assert_int_equal(hl_raw_int(fx.server, "HLEN", "fair-ride-stopped",
                                (char *)NULL),
                     1);
    assert_int_equal(hl_raw_int(fx.server, "LLEN",
                                "redisson_lock_queue:{fair-ride-stopped}",
                                (char *)NULL),
                     0);

    release_owner(l, RIDER);
    assert_int_equal(hl_raw_exists(fx.server, "fair-ride-stopped"), 0);
    hl_free_lock(l);
    hl_free_client(c);
}

/* Grants go out unheard while pub/sub connections are killed, and are
 * claimed, or given back by waiters that gave up (handoff_faults.h). */
static void test_fair_handoffs_under_pubsub_kills(void **state)
{
    (void)state;
    hl_handoffs_under_pubsub_kills(fx.server, hl_new_fair_lock, "fair-killed-handoffs");
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_release_hands_the_fair_lock_over),
        T(test_lost_grant_message_is_claimed),
        T(test_gone_waiter_gives_its_grant_back),
        T(test_dead_waiter_grant_runs_out_with_its_place),
        T(test_wake_ups_both_ways_beside_java),
        T(test_release_carries_the_next_attempt),
        T(test_release_carries_a_wishing_attempt),
        T(test_rider_behind_another_clients_waiter),
        T(test_ridden_release_without_answer),
        T(test_fair_handoffs_under_pubsub_kills),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
