/* The direct hand-off cases shared by the kinds that line up waiting
 * clients; see line_handoff.h. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/lock.h"
#include "support/line_handoff.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

#define OWNER 7
/* A client in line that recorded a wish and died (the cases write its
 * place and wish by hand). */
#define DEAD_CLIENT "5d1e0b3a-0c4f-4e1b-8a2d-7f6e5d4c3b2a"
#define DEAD_WISH "w " DEAD_CLIENT ":1 30000 " DEAD_CLIENT ":1"
/* The same wish, from an attempt told that its client was first in line:
 * the client listened on Redisson's channel, until it died. */
#define DEAD_FIRST_WISH "W " DEAD_CLIENT ":1 30000 " DEAD_CLIENT ":1"

const hl_line_kind hl_reentrant_line = {
    .keys = &hl_lock_line_keys,
    .make = hl_new_lock,
    .channel = "redisson_lock__channel",
    .next = "hilock_lock_next",
    .hold_suffix = "",
    .mode = NULL,
    .java_says = "0",
    .lean_release = true,
};

const hl_line_kind hl_writers_line = {
    .keys = &hl_rwlock_line_keys,
    .make = hl_new_write_lock,
    .channel = "redisson_rwlock",
    .next = "hilock_rwlock_next",
    .hold_suffix = ":write",
    .mode = "write",
    .java_says = "1",
};

typedef struct key_buf {
    char s[160];
} key_buf;

static key_buf key_of(const char *prefix, const char *name)
{
    key_buf k;
    snprintf(k.s, sizeof k.s, "%s:{%s}", prefix, name);
    return k;
}

/* field's hold in the kind's hash (field without the kind's suffix). */
static long long hold_of(hl_redis_server *s, const hl_line_kind *k,
                         const char *name, const char *field)
{
    char f[128];
    snprintf(f, sizeof f, "%s%s", field, k->hold_suffix);
    return hl_hold_of(s, name, f);
}

static long long owner_hold_of(hl_redis_server *s, const hl_line_kind *k,
                               const char *name, hilock_client *c)
{
    char f[96];
    snprintf(f, sizeof f, "%s:%d", hilock_client_id(c), OWNER);
    return hold_of(s, k, name, f);
}

/* field holds the lock name for ms, as the kind's hash keeps a hold. */
static void write_hold(hl_redis_server *s, const hl_line_kind *k,
                       const char *name, const char *field, long long ms)
{
    char f[128], t[24];

    snprintf(f, sizeof f, "%s%s", field, k->hold_suffix);
    if (k->mode != NULL)
        assert_int_equal(hl_raw_int(s, "HSET", name, "mode", k->mode, f, "1",
                                    (char *)NULL),
                         2);
    else
        assert_int_equal(hl_raw_int(s, "HSET", name, f, "1", (char *)NULL), 1);
    snprintf(t, sizeof t, "%lld", ms);
    assert_int_equal(hl_raw_int(s, "PEXPIRE", name, t, (char *)NULL), 1);
}

/* Redisson's tryLock, by hand: the lock taken for HL_JAVA_FIELD when free
 * (-1); else its ttl. */
static long long java_attempt(hl_redis_server *s, const hl_line_kind *k,
                              const char *name)
{
    if (hl_raw_exists(s, name) == 0) {
        write_hold(s, k, name, HL_JAVA_FIELD, 30000);
        return -1;
    }
    return hl_raw_pttl(s, name);
}

/* What a release does for a wish, done by hand, without the message that
 * would tell its client: the message is lost.  The lock's holder (a
 * Redisson-shaped hold) goes, and the wish's field holds for ms. */
static void grant_unheard(hl_redis_server *s, const hl_line_kind *k,
                          const char *name, hilock_client *c,
                          const hl_wish *w, long long ms)
{
    assert_int_equal(hl_raw_int(s, "DEL", name, (char *)NULL), 1);
    write_hold(s, k, name, w->field, ms);
    hl_grant_wish_unheard(s, k->keys, name, hilock_client_id(c), w);
}

/* A dead client first in line, with a place of place_ms and the wish. */
static void dead_client_wishing(hl_redis_server *s, const hl_line_kind *k,
                                const char *name, long long place_ms,
                                const char *wish)
{
    char at[32];

    snprintf(at, sizeof at, "%lld", hl_raw_server_ms(s) + place_ms);
    (void)hl_raw_int(s, "RPUSH", key_of(k->keys->line, name).s, DEAD_CLIENT,
                     (char *)NULL);
    (void)hl_raw_int(s, "ZADD", key_of(k->keys->alive, name).s, at,
                     DEAD_CLIENT, (char *)NULL);
    (void)hl_raw_int(s, "HSET", key_of(k->keys->want, name).s, DEAD_CLIENT,
                     wish, (char *)NULL);
}

static void dead_client_in_line(hl_redis_server *s, const hl_line_kind *k,
                                const char *name, long long place_ms)
{
    dead_client_wishing(s, k, name, place_ms, DEAD_WISH);
}

/* A holder's client and a waiting client whose places last 2 s, each
 * with a handle on the lock. */
typedef struct holder_and_waiter {
    hilock_client *h, *w;
    hilock_lock *lh, *lw;
} holder_and_waiter;

static holder_and_waiter holder_and_waiter_open(hl_redis_server *s,
                                                const hl_line_kind *k,
                                                const char *name)
{
    const hl_client_opts wopts = {.waiter_ms = 2000};
    holder_and_waiter p;

    p.h = hl_new_client(s, NULL);
    p.w = hl_new_client(s, &wopts);
    p.lh = k->make(p.h, name);
    p.lw = k->make(p.w, name);
    return p;
}

static void holder_and_waiter_close(holder_and_waiter *p)
{
    hl_free_lock(p->lw);
    hl_free_lock(p->lh);
    hl_free_client(p->w);
    hl_free_client(p->h);
}

/* lh takes the lock and w's acquire on lw waits in line with a wish,
 * which lh's release grants: the acquire (rec) holds, handed over. */
static void hand_to_waiter(hl_redis_server *s, const hl_line_kind *k,
                           const char *name, hilock_lock *lh,
                           hilock_client *w, hilock_lock *lw,
                           hl_acquire_rec *rec)
{
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, rec, NULL);
    (void)hl_expect_wish(s, k->keys, name, w, OWNER);
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(rec), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 1);
}

/* Before direct hand-offs, the woken waiter sent an acquire: 2 scripts.
 * The place is 2 s, where the lease is 30 s. */
void hl_case_release_hands_over(hl_redis_server *s, const hl_line_kind *k,
                                const char *name)
{
    holder_and_waiter p = holder_and_waiter_open(s, k, name);
    hilock_client *w = p.w;
    hilock_lock *lh = p.lh, *lw = p.lw;
    static hl_acquire_rec rec;
    static hl_lost_rec lost;

    hl_lost_rec_init(&lost, w);
    assert_status(hilock_lock_set_lost_callback(lw, hl_record_lost, &lost),
                  HILOCK_OK);
    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    hl_wish wish = hl_expect_wish(s, k->keys, name, w, OWNER);
    assert_int_equal(wish.lease_ms, 30000);
    /* Alone in line, so told it is first: it listens on Redisson's
     * channel, and the wish says so, which no other listener does. */
    assert_true(wish.first);

    long long before = hl_scripts_run(s);
    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(rec.got.hold_count, 1);
    assert_int_equal(hl_scripts_run(s) - before, k->lean_release ? 2 : 1);
    assert_int_equal(hl_handed_to(w), 1);
    assert_int_equal(owner_hold_of(s, k, name, w), 1);
    long long ttl = hl_raw_pttl(s, name);
    if (ttl <= 0 || ttl > 2000)
        fail_msg("the grant lasts %lld ms on the server, where the "
                 "waiter's place lasted at most 2000",
                 ttl);
    assert_int_equal(hl_read_wish(s, k->keys, name, hilock_client_id(w)).kind,
                     'g');

    /* Renewed before the place would have run out, and held past it. */
    if (!hl_wait_pttl_above(s, name, 2000, hl_widen(2000)))
        fail_msg("no renewal before the grant's expiry");
    while (hl_now_ms() < released_at + 2500)
        hl_sleep_ms(50);
    assert_int_equal(atomic_load(&lost.calls), 0);
    assert_false(hilock_lock_owner_lost(lw, OWNER));
    assert_int_equal(owner_hold_of(s, k, name, w), 1);

    /* The grantee's release frees the lock. */
    assert_int_equal(hl_release_one(lw, OWNER), 0);
    assert_int_equal(hl_raw_exists(s, name), 0);
    holder_and_waiter_close(&p);
}

/* The grantee lets go with nobody waiting and takes the free lock again:
 * that attempt, which records no wish, drops the grant the release left
 * under its client. */
void hl_case_grant_record_goes_with_next_hold(hl_redis_server *s,
                                              const hl_line_kind *k,
                                              const char *name)
{
    holder_and_waiter p = holder_and_waiter_open(s, k, name);
    hilock_client *w = p.w;
    hilock_lock *lh = p.lh, *lw = p.lw;
    static hl_acquire_rec rec, again;

    hand_to_waiter(s, k, name, lh, w, lw, &rec);
    assert_int_equal(hl_read_wish(s, k->keys, name, hilock_client_id(w)).kind,
                     'g');

    assert_int_equal(hl_release_one(lw, OWNER), 0);
    assert_int_equal(hl_raw_exists(s, name), 0);
    hl_acquire_rec_init(&again, w);
    assert_status(hilock_lock_acquire_async(lw, OWNER, HILOCK_WAIT_FOREVER,
                                            HILOCK_LEASE_WATCHDOG, 0,
                                            hl_record_acquire, &again, NULL),
                  HILOCK_OK);
    assert_status(hl_expect_acquire(&again), HILOCK_OK);
    assert_int_equal(again.got.hold_count, 1);
    assert_int_equal(hl_read_wish(s, k->keys, name, hilock_client_id(w)).kind,
                     0);
    assert_int_equal(hl_release_one(lw, OWNER), 0);
    holder_and_waiter_close(&p);
}

/* Three clients wait behind a holder, with places of 1.5 s, so each
 * attempt that renews a place comes within 0.5 s; the line's keys are cut
 * by hand to 1.4 s, less than a place, which the next renewing attempt
 * finds too short: it keeps the line and its places alike, for twice a
 * place, and nobody's place is lost. */
void hl_case_line_keys_kept_together(hl_redis_server *s,
                                     const hl_line_kind *k, const char *name)
{
    const hl_client_opts wopts = {.waiter_ms = 1500};
    hilock_client *h = hl_new_client(s, NULL);
    hilock_lock *lh = k->make(h, name);
    hilock_client *w[3];
    hilock_lock *lw[3];
    static hl_acquire_rec rec[3];
    key_buf line = key_of(k->keys->line, name);
    key_buf alive = key_of(k->keys->alive, name);

    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    for (int i = 0; i < 3; i++) {
        w[i] = hl_new_client(s, &wopts);
        lw[i] = k->make(w[i], name);
        hl_wait_in_line(w[i], lw[i], OWNER, &rec[i], NULL);
    }
    assert_int_equal(hl_raw_int(s, "LLEN", line.s, (char *)NULL), 3);
    assert_int_equal(hl_raw_int(s, "ZCARD", alive.s, (char *)NULL), 3);
    (void)hl_raw_int(s, "PEXPIRE", line.s, "1400", (char *)NULL);
    (void)hl_raw_int(s, "PEXPIRE", alive.s, "1400", (char *)NULL);

    if (!hl_wait_pttl_above(s, line.s, 1500, hl_widen(3000)))
        fail_msg("the line was not kept: PTTL %lld", hl_raw_pttl(s, line.s));
    long long kept = hl_raw_pttl(s, alive.s);
    if (kept <= 1500)
        fail_msg("the line was kept and its places not: PTTL %lld", kept);
    assert_int_equal(hl_raw_int(s, "ZCARD", alive.s, (char *)NULL), 3);

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    /* In the order of the line. */
    for (int i = 0; i < 3; i++) {
        assert_status(hl_expect_acquire(&rec[i]), HILOCK_OK);
        assert_int_equal(hl_release_one(lw[i], OWNER), 0);
    }
    for (int i = 0; i < 3; i++) {
        hl_free_lock(lw[i]);
        hl_free_client(w[i]);
    }
    hl_free_lock(lh);
    hl_free_client(h);
}

/* The waiter's next attempt comes within a third of its waiter timeout
 * (3 s). */
void hl_case_lost_grant_claimed(hl_redis_server *s, const hl_line_kind *k,
                                const char *name)
{
    const hl_client_opts wopts = {.waiter_ms = 3000};
    hilock_client *w = hl_new_client(s, &wopts);
    hilock_lock *lw = k->make(w, name);
    static hl_acquire_rec rec;
    hl_value_rec count;

    hl_value_rec_init(&count);
    write_hold(s, k, name, HL_JAVA_FIELD, 30000);
    hl_wait_in_line(w, lw, OWNER, &rec, NULL);
    hl_wish wi = hl_expect_wish(s, k->keys, name, w, OWNER);
    long long before = hl_scripts_run(s);
    grant_unheard(s, k, name, w, &wi, 3000);

    assert_status(hl_expect_acquire(&rec), HILOCK_OK);
    assert_int_equal(rec.got.hold_count, 1);
    /* The one attempt that found the grant: no second hold to take
     * back. */
    assert_int_equal(hl_scripts_run(s) - before, 1);
    assert_int_equal(hold_of(s, k, name, wi.field), 1);
    assert_int_equal(hl_read_wish(s, k->keys, name, hilock_client_id(w)).kind,
                     0);
    /* The claim set the whole lease. */
    assert_true(hl_raw_pttl(s, name) > 3000);
    assert_status(hilock_lock_hold_count_async(lw, OWNER, hl_record_value,
                                               &count),
                  HILOCK_OK);
    assert_int_equal(hl_expect_value(&count, HILOCK_OK), 1);
    hl_free_lock(lw);
    hl_free_client(w);
}

/* The waiter's message is lost and its next attempt 20 s away; the grant
 * would last 30 s. */
void hl_case_gone_waiter_gives_back(hl_redis_server *s, const hl_line_kind *k,
                                    const char *name)
{
    const hl_client_opts wopts = {.waiter_ms = 60000};
    hilock_client *w = hl_new_client(s, &wopts);
    hilock_client *y = hl_new_client(s, NULL);
    hilock_lock *lw = k->make(w, name);
    hilock_lock *ly = k->make(y, name);
    static hl_acquire_rec rw, ry;
    uint64_t id = 0;

    write_hold(s, k, name, HL_JAVA_FIELD, 30000);
    hl_wait_in_line(w, lw, OWNER, &rw, &id);
    hl_wait_in_line(y, ly, OWNER, &ry, NULL);
    hl_wish wi = hl_expect_wish(s, k->keys, name, w, OWNER);
    grant_unheard(s, k, name, w, &wi, 30000);

    assert_status(hilock_lock_cancel(lw, id), HILOCK_OK);
    assert_status(hl_expect_acquire(&rw), HILOCK_ECANCELED);
    int64_t gone_at = hl_now_ms();
    assert_status(hl_expect_acquire(&ry), HILOCK_OK);
    print_message("    the next client got the lock %lld ms after the "
                  "waiter gave up\n",
                  (long long)(ry.at_ms - gone_at));
    assert_int_equal(hold_of(s, k, name, wi.field), 0);
    assert_int_equal(owner_hold_of(s, k, name, y), 1);
    hl_free_lock(ly);
    hl_free_lock(lw);
    hl_free_client(y);
    hl_free_client(w);
}

/* The place is 3 s, the lease 30 s; the next client in line, as any other
 * library's waiter retrying at the lock's ttl, gets the lock when the
 * grant runs out. */
void hl_case_dead_client_grant(hl_redis_server *s, const hl_line_kind *k,
                               const char *name)
{
    hilock_client *h = hl_new_client(s, NULL);
    hilock_client *y = hl_new_client(s, NULL);
    hilock_lock *lh = k->make(h, name);
    hilock_lock *ly = k->make(y, name);
    static hl_acquire_rec ry;

    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    dead_client_in_line(s, k, name, 3000);
    hl_wait_in_line(y, ly, OWNER, &ry, NULL);

    int64_t released_at = hl_now_ms();
    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_int_equal(hold_of(s, k, name, DEAD_CLIENT ":1"), 1);
    long long ttl = hl_raw_pttl(s, name);
    if (ttl <= 0 || ttl > 3000)
        fail_msg("the dead client's grant lasts %lld ms", ttl);
    assert_status(hl_expect_acquire(&ry), HILOCK_OK);
    print_message("    dead client's grant: the next client got the lock "
                  "%lld ms after the release\n",
                  (long long)(ry.at_ms - released_at));
    assert_int_equal(hold_of(s, k, name, DEAD_CLIENT ":1"), 0);
    hl_free_lock(ly);
    hl_free_lock(lh);
    hl_free_client(y);
    hl_free_client(h);
}

/* Our release hands the lock to our waiting client while nobody listens
 * on Redisson's channel, so a Java waiter that comes then finds it held;
 * the release of that client, with nobody of ours in line, tells
 * Redisson's channel, and the Java waiter takes the lock.  Its release
 * wakes our next waiter, which takes the lock with an attempt of its own
 * and drops its wish. */
void hl_case_wake_ups_beside_java(hl_redis_server *s, const hl_line_kind *k,
                                  const char *name)
{
    hilock_client *h = hl_new_client(s, NULL);
    hilock_client *w = hl_new_client(s, NULL);
    hilock_lock *lh = k->make(h, name);
    hilock_lock *lw = k->make(w, name);
    static hl_acquire_rec rec, again;
    key_buf channel = key_of(k->channel, name);
    char msg[16];

    hand_to_waiter(s, k, name, lh, w, lw, &rec);
    hl_plain_sub *java = hl_plain_sub_open(s, channel.s);
    assert_true(java_attempt(s, k, name) > 0);

    assert_int_equal(hl_release_one(lw, OWNER), 0);
    if (!hl_plain_sub_next(java, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the Java waiter heard no release");
    assert_int_equal(java_attempt(s, k, name), -1);

    hl_wait_in_line(w, lw, OWNER, &again, NULL);
    (void)hl_expect_wish(s, k->keys, name, w, OWNER);
    assert_int_equal(hl_raw_int(s, "DEL", name, (char *)NULL), 1);
    (void)hl_raw_int(s, "PUBLISH", channel.s, k->java_says, (char *)NULL);
    assert_status(hl_expect_acquire(&again), HILOCK_OK);
    assert_int_equal(hl_handed_to(w), 1);
    assert_int_equal(hl_read_wish(s, k->keys, name, hilock_client_id(w)).kind,
                     0);
    hl_plain_sub_close(java);
    hl_free_lock(lw);
    hl_free_lock(lh);
    hl_free_client(w);
    hl_free_client(h);
}

/* Grant after grant could keep the lock from a Java waiter for as long as
 * our clients keep wishing.  The wish is a dead client's, whose attempt
 * never comes, so that nothing races the Java waiter's. */
static void java_waiter_told_beside(hl_redis_server *s, const hl_line_kind *k,
                                    const char *name, const char *wish)
{
    hilock_client *h = hl_new_client(s, NULL);
    hilock_lock *lh = k->make(h, name);
    char next[64], msg[16];

    assert_status(hilock_lock_try_acquire(lh, 0, 30000), HILOCK_OK);
    dead_client_wishing(s, k, name, 30000, wish);
    hl_plain_sub *java = hl_plain_sub_open(s, key_of(k->channel, name).s);

    assert_status(hilock_lock_release(lh), HILOCK_OK);
    assert_int_equal(hold_of(s, k, name, DEAD_CLIENT ":1"), 0);
    assert_true(hl_raw_bulk(s, next, sizeof next, "GET",
                            key_of(k->next, name).s, (char *)NULL));
    assert_string_equal(next, DEAD_CLIENT);
    if (!hl_plain_sub_next(java, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the Java waiter heard no release");
    assert_int_equal(java_attempt(s, k, name), -1);
    hl_plain_sub_close(java);
    hl_free_lock(lh);
    hl_free_client(h);
}

void hl_case_java_waiter_told(hl_redis_server *s, const hl_line_kind *k,
                              const char *name)
{
    java_waiter_told_beside(s, k, name, DEAD_WISH);
}

/* A wish from an attempt told it was first says that its client listens
 * on Redisson's channel, so that one subscriber there may be that client.
 * Dead, it listens nowhere: the one subscriber is the Java waiter, which
 * must hear of the release rather than wait out the lock's ttl while the
 * dead client's grant runs out. */
void hl_case_java_waiter_told_beside_dead_first(hl_redis_server *s,
                                                const hl_line_kind *k,
                                                const char *name)
{
    java_waiter_told_beside(s, k, name, DEAD_FIRST_WISH);
}
