/* hilock beside Redisson's own scripts on one server.  A peer that
 * follows Redisson's published algorithm (support/redisson_peer.h, and
 * for the read-write lock the keys a Java reader writes) shares a lock
 * with hilock handles, and each test checks what the Java side would
 * see: its keys, its place in a fair line, and the messages on its
 * channels, read over connections of the fixture's own.
 *
 * Covered: a hilock read release beside a Java reader whose hold ran
 * out; fair lines mixing Java and hilock waiters (places kept, order of
 * grants, each waiter messaged on its own channel at the head). */
/* ctest-timeout: 120 */
#include <inttypes.h>
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
#include "hilock/rwlock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"
#include "support/redisson_peer.h"

static hl_lock_fixture fx;

/* Long enough that no lease or place of a live party runs out during a
 * test: only releases and messages can explain what happens. */
#define LONG_MS 300000

#define OWNER_A UINT64_C(0xA1)
#define OWNER_B UINT64_C(0xB2)
#define OWNER_C UINT64_C(0xC3)

#define KEY_CAP 256
#define FIELD_CAP 128

typedef struct pttl_want {
    const char *key;
} pttl_want;

static bool key_gone(void *arg)
{
    return hl_raw_pttl(fx.server, ((pttl_want *)arg)->key) == -2;
}

/* Waits for key to run out on the server, by its PTTL. */
static void expect_key_runs_out(const char *key, int timeout_ms)
{
    pttl_want w = { key };

    if (!hl_wait_until(key_gone, &w, timeout_ms))
        fail_msg("%s still had PTTL %lld after %d ms", key,
                 hl_raw_pttl(fx.server, key), timeout_ms);
}

/* ---- read-write lock --------------------------------------------------- */

/* A Java reader that died: its field in the hash, and the key of its one
 * read hold, which runs out soon, as nobody renews it. */
static void java_reader_that_dies(const char *name, const char *field,
                                  int lease_ms)
{
    char tkey[KEY_CAP], ms[24];

    snprintf(tkey, sizeof tkey, "{%s}:%s:rwlock_timeout:1", name, field);
    snprintf(ms, sizeof ms, "%d", lease_ms);
    assert_int_equal(hl_raw_int(fx.server, "HINCRBY", name, field, "1",
                                (char *)NULL), 1);
    hl_raw_cmd(fx.server, NULL, 0, "SET", tkey, "1", "PX", ms, (char *)NULL);
    expect_key_runs_out(tkey, hl_widen(5000));
}

/* The last live reader is hilock's, and the other reader's hold ran out:
 * Redisson's read release frees the lock then and says so, so a Java
 * writer (which only retries on that message or the lock's ttl) gets in
 * at once.  hilock's release must do the same. */
static void test_read_release_beside_expired_java_reader(void **state)
{
    static const char name[] = "rwmix";
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, name);
    hl_plain_sub *sub;
    char msg[32];

    (void)state;
    assert_status(hilock_lock_try_acquire(r, 0, LONG_MS), HILOCK_OK);
    java_reader_that_dies(name, "java-uuid:7", 50);
    sub = hl_plain_sub_open(fx.server, "redisson_rwlock:{rwmix}");
    assert_status(hilock_lock_release(r), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, name), 0);
    if (!hl_plain_sub_next(sub, msg, sizeof msg, hl_widen(5000)))
        fail_msg("the release published nothing on the lock's channel");
    assert_string_equal(msg, "0");
    hl_plain_sub_close(sub);
    hl_free_lock(r);
    hl_free_client(c);
}

/* A live Java reader keeps the lock: the release says nothing and the
 * hash lives on with the Java hold's lease. */
static void test_read_release_beside_live_java_reader(void **state)
{
    static const char name[] = "rwlive";
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, name);
    hl_plain_sub *sub;
    char msg[32];

    (void)state;
    assert_status(hilock_lock_try_acquire(r, 0, LONG_MS), HILOCK_OK);
    assert_int_equal(hl_raw_int(fx.server, "HINCRBY", name, "java-uuid:8",
                                "1", (char *)NULL), 1);
    hl_raw_cmd(fx.server, NULL, 0, "SET",
               "{rwlive}:java-uuid:8:rwlock_timeout:1", "1", "PX", "600000",
               (char *)NULL);
    sub = hl_plain_sub_open(fx.server, "redisson_rwlock:{rwlive}");
    assert_status(hilock_lock_release(r), HILOCK_OK);
    assert_int_equal(hl_raw_exists(fx.server, name), 1);
    assert_true(hl_raw_pttl(fx.server, name) > LONG_MS);
    /* A marker published after the release comes first only if the
     * release published nothing. */
    assert_int_equal(hl_raw_int(fx.server, "PUBLISH",
                                "redisson_rwlock:{rwlive}", "marker",
                                (char *)NULL), 1);
    assert_true(hl_plain_sub_next(sub, msg, sizeof msg, hl_widen(5000)));
    assert_string_equal(msg, "marker");
    hl_plain_sub_close(sub);
    hl_free_lock(r);
    hl_free_client(c);
}

/* Releases owner's hold, waiting for the answer. */
static int release_owner(hilock_lock *l, uint64_t owner)
{
    static hl_value_rec v;

    hl_value_rec_init(&v);
    assert_status(hilock_lock_release_async(l, owner, hl_record_value, &v),
                  HILOCK_OK);
    hl_expect_count(&v.calls, 1, hl_widen(10000));
    return v.status;
}

/* ---- fair lines -------------------------------------------------------- */

/* hilock waiters try again every third of this, so within a test only
 * messages move them; and it is well below Redisson's thread wait time,
 * so a place reckoned from it alone would lie in the past after one
 * Redisson grant. */
#define WAITER_MS 60000

typedef struct llen_want {
    const char *key;
    long long want;
} llen_want;

static bool llen_is(void *arg)
{
    llen_want *w = arg;

    return hl_raw_int(fx.server, "LLEN", w->key, (char *)NULL) == w->want;
}

static void expect_llen(const char *name, long long want)
{
    char key[KEY_CAP];
    llen_want w = { key, want };

    snprintf(key, sizeof key, "redisson_lock_queue:{%s}", name);
    if (!hl_wait_until(llen_is, &w, hl_widen(10000)))
        fail_msg("the line of %s has %lld waiters, expected %lld", name,
                 hl_raw_int(fx.server, "LLEN", key, (char *)NULL), want);
}

/* The line's members in order, joined by spaces. */
static void line_of(const char *name, char *out, size_t cap)
{
    char key[KEY_CAP], reply[HL_RAW_REPLY_CAP], m[FIELD_CAP];
    const char *p = reply;
    size_t len = 0;
    long n;

    snprintf(key, sizeof key, "redisson_lock_queue:{%s}", name);
    hl_raw_cmd(fx.server, reply, sizeof reply, "LRANGE", key, "0", "-1",
               (char *)NULL);
    n = hl_raw_parse_array(&p);
    out[0] = '\0';
    for (long i = 0; i < n; i++) {
        hl_raw_parse_bulk(&p, m, sizeof m);
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "",
                                m);
        if (len >= cap)
            break;
    }
}

static void hilock_field(char *out, hilock_client *c, uint64_t owner)
{
    snprintf(out, FIELD_CAP, "%s:%" PRIu64, hilock_client_id(c), owner);
}

static void hilock_channel(char *out, const char *name, hilock_client *c,
                           uint64_t owner)
{
    snprintf(out, KEY_CAP, "redisson_lock__channel:{%s}:%s:%" PRIu64, name,
             hilock_client_id(c), owner);
}

/* The message that tells a waiter it heads the line, on its own
 * channel. */
static void expect_turn(hl_plain_sub *sub, const char *who)
{
    char msg[32];

    if (!hl_plain_sub_next(sub, msg, sizeof msg, hl_widen(5000)))
        fail_msg("%s was never told that it heads the line", who);
    assert_string_equal(msg, "0");
}

/* Nothing was published on the channel so far: a marker published now
 * comes first. */
static void expect_no_message(hl_plain_sub *sub, const char *channel)
{
    char msg[32];

    assert_true(hl_raw_int(fx.server, "PUBLISH", channel, "marker",
                           (char *)NULL) >= 1);
    assert_true(hl_plain_sub_next(sub, msg, sizeof msg, hl_widen(5000)));
    if (strcmp(msg, "marker") != 0)
        fail_msg("%s got \"%s\" before its turn", channel, msg);
}

/* A Java waiter that queued behind a hilock waiter keeps its place when
 * the hilock waiter goes: Redisson never renews a place and never sets
 * an expiry on the line, so an expiry set by hilock would take the line,
 * and the Java waiter's place with it, while the Java waiter sleeps
 * until it is messaged. */
static void test_java_waiter_keeps_place(void **state)
{
    static const char name[] = "fa";
    hilock_client *hc = hl_new_client(fx.server, NULL);
    hilock_client *wc =
        hl_new_client(fx.server, &(hl_client_opts){ .waiter_ms = 500 });
    hilock_lock *h = hl_new_fair_lock(hc, name);
    hilock_lock *w = hl_new_fair_lock(wc, name);
    static hl_acquire_rec wa;
    char jch[KEY_CAP], jf[FIELD_CAP], line[512];
    hl_plain_sub *js;
    hl_rpeer j;

    (void)state;
    hl_rpeer_init(&j, hc, name, "java-uuid");
    hl_rpeer_field(&j, 1, jf, sizeof jf);
    hl_rpeer_channel(&j, 1, jch, sizeof jch);
    assert_status(hilock_lock_try_acquire(h, 0, LONG_MS), HILOCK_OK);
    hl_acquire_rec_init(&wa, NULL);
    assert_status(hilock_lock_acquire_async(w, OWNER_A, hl_widen(60000),
                                            LONG_MS, 0, hl_record_acquire,
                                            &wa, &wa.id),
                  HILOCK_OK);
    expect_llen(name, 1);
    js = hl_plain_sub_open(fx.server, jch);
    assert_true(hl_rpeer_attempt(&j, 1, LONG_MS) >= 0);
    expect_llen(name, 2);
    assert_status(hilock_lock_cancel(w, wa.id), HILOCK_OK);
    assert_status(hl_expect_acquire(&wa), HILOCK_ECANCELED);
    expect_llen(name, 1);
    /* The Java waiter alone in line: nothing may make the line expire. */
    assert_int_equal(hl_raw_pttl(fx.server, "redisson_lock_queue:{fa}"), -1);
    assert_int_equal(hl_raw_pttl(fx.server, "redisson_lock_timeout:{fa}"),
                     -1);
    line_of(name, line, sizeof line);
    assert_string_equal(line, jf);

    assert_status(hilock_lock_release(h), HILOCK_OK);
    expect_turn(js, "the Java waiter");
    assert_int_equal(hl_rpeer_attempt(&j, 1, LONG_MS), -1);
    assert_int_equal(hl_rpeer_unlock(&j, 1, LONG_MS), 1);
    hl_plain_sub_close(js);
    hl_free_lock(w);
    hl_free_lock(h);
    hl_free_client(wc);
    hl_free_client(hc);
}

/* The line J1, H2, J2 behind a hilock holder is granted in that order,
 * each told on its own channel when it heads the line, whichever side
 * released before it.  J1's grant takes Redisson's thread wait time off
 * every place behind it, H2's included; Redisson's release then drops
 * any head whose place lies in the past, so H2's place must have been
 * far enough ahead to survive that. */
static void test_mixed_line_in_order(void **state)
{
    static const char name[] = "fb";
    hilock_client *hc = hl_new_client(fx.server, NULL);
    hilock_client *wc = hl_new_client(
        fx.server, &(hl_client_opts){ .waiter_ms = WAITER_MS });
    hilock_lock *h = hl_new_fair_lock(hc, name);
    hilock_lock *w = hl_new_fair_lock(wc, name);
    static hl_acquire_rec wa;
    char ch[3][KEY_CAP], f[3][FIELD_CAP], want[512], line[512];
    hl_plain_sub *sub[3];
    hl_rpeer j;

    (void)state;
    hl_rpeer_init(&j, hc, name, "java-uuid");
    hl_rpeer_field(&j, 1, f[0], sizeof f[0]);
    hl_rpeer_channel(&j, 1, ch[0], sizeof ch[0]);
    hilock_field(f[1], wc, OWNER_A);
    hilock_channel(ch[1], name, wc, OWNER_A);
    hl_rpeer_field(&j, 2, f[2], sizeof f[2]);
    hl_rpeer_channel(&j, 2, ch[2], sizeof ch[2]);
    for (int i = 0; i < 3; i++)
        sub[i] = hl_plain_sub_open(fx.server, ch[i]);

    assert_status(hilock_lock_try_acquire(h, 0, LONG_MS), HILOCK_OK);
    assert_true(hl_rpeer_attempt(&j, 1, LONG_MS) >= 0);
    hl_acquire_rec_init(&wa, NULL);
    assert_status(hilock_lock_acquire_async(w, OWNER_A, hl_widen(60000),
                                            LONG_MS, 0, hl_record_acquire,
                                            &wa, &wa.id),
                  HILOCK_OK);
    expect_llen(name, 2);
    /* Settled: from now on only a message makes H2 try again. */
    hl_expect_pending(wc, w, 1);
    assert_true(hl_rpeer_attempt(&j, 2, LONG_MS) >= 0);
    snprintf(want, sizeof want, "%s %s %s", f[0], f[1], f[2]);
    line_of(name, line, sizeof line);
    assert_string_equal(line, want);

    /* A hilock release: J1's turn. */
    assert_status(hilock_lock_release(h), HILOCK_OK);
    expect_turn(sub[0], "J1");
    assert_int_equal(hl_rpeer_attempt(&j, 1, LONG_MS), -1);
    /* No marker on H2's channel: any message makes a hilock waiter try
     * again, which would renew its place and hide what J1's grant did. */
    assert_int_equal(atomic_load(&wa.calls), 0);

    /* A Java release: H2's turn, not J2's. */
    assert_int_equal(hl_rpeer_unlock(&j, 1, LONG_MS), 1);
    expect_turn(sub[1], "H2");
    assert_status(hl_expect_acquire(&wa), HILOCK_OK);
    expect_no_message(sub[2], ch[2]);
    assert_true(hl_rpeer_attempt(&j, 2, LONG_MS) >= 0);

    /* A hilock release: J2's turn. */
    assert_status(release_owner(w, OWNER_A), HILOCK_OK);
    expect_turn(sub[2], "J2");
    assert_int_equal(hl_rpeer_attempt(&j, 2, LONG_MS), -1);
    assert_int_equal(hl_rpeer_unlock(&j, 2, LONG_MS), 1);
    for (int i = 0; i < 3; i++)
        hl_plain_sub_close(sub[i]);
    hl_free_lock(w);
    hl_free_lock(h);
    hl_free_client(wc);
    hl_free_client(hc);
}

/* A Java tryLock whose wait runs out takes its wait off the places behind
 * it.  The hilock waiter behind must still come next, before the Java
 * waiter behind it. */
static void test_java_give_up_keeps_order(void **state)
{
    static const char name[] = "fc";
    hilock_client *hc = hl_new_client(fx.server, NULL);
    hilock_client *wc = hl_new_client(
        fx.server, &(hl_client_opts){ .waiter_ms = WAITER_MS });
    hilock_lock *h = hl_new_fair_lock(hc, name);
    hilock_lock *w = hl_new_fair_lock(wc, name);
    static hl_acquire_rec wa;
    char ch[2][KEY_CAP];
    hl_plain_sub *sub[2];
    hl_rpeer j;

    (void)state;
    hl_rpeer_init(&j, hc, name, "java-uuid");
    hilock_channel(ch[0], name, wc, OWNER_A);
    hl_rpeer_channel(&j, 3, ch[1], sizeof ch[1]);
    for (int i = 0; i < 2; i++)
        sub[i] = hl_plain_sub_open(fx.server, ch[i]);
    assert_status(hilock_lock_try_acquire(h, 0, LONG_MS), HILOCK_OK);
    assert_true(hl_rpeer_attempt(&j, 1, LONG_MS) >= 0);
    hl_acquire_rec_init(&wa, NULL);
    assert_status(hilock_lock_acquire_async(w, OWNER_A, hl_widen(60000),
                                            LONG_MS, 0, hl_record_acquire,
                                            &wa, &wa.id),
                  HILOCK_OK);
    expect_llen(name, 2);
    hl_expect_pending(wc, w, 1);
    assert_true(hl_rpeer_attempt(&j, 3, LONG_MS) >= 0);
    expect_llen(name, 3);
    hl_rpeer_give_up(&j, 1);
    expect_llen(name, 2);

    assert_status(hilock_lock_release(h), HILOCK_OK);
    expect_turn(sub[0], "the hilock waiter");
    assert_status(hl_expect_acquire(&wa), HILOCK_OK);
    expect_no_message(sub[1], ch[1]);
    assert_status(release_owner(w, OWNER_A), HILOCK_OK);
    expect_turn(sub[1], "the Java waiter behind it");
    assert_int_equal(hl_rpeer_attempt(&j, 3, LONG_MS), -1);
    assert_int_equal(hl_rpeer_unlock(&j, 3, LONG_MS), 1);
    for (int i = 0; i < 2; i++)
        hl_plain_sub_close(sub[i]);
    hl_free_lock(w);
    hl_free_lock(h);
    hl_free_client(wc);
    hl_free_client(hc);
}

static long long zscore_of(const char *key, const char *member)
{
    char num[64];

    if (!hl_raw_bulk(fx.server, num, sizeof num, "ZSCORE", key, member,
                     (char *)NULL))
        fail_msg("%s has no place in %s", member, key);
    return (long long)strtod(num, NULL);
}

/* Where hilock puts its places in Redisson's timeout set: behind a Java
 * place by Redisson's thread wait time, so that a Java grant leaves
 * them in the future; behind one of its own by no more than the waiter
 * timeout needs, so that a Java waiter behind a dead hilock waiter is not
 * held up for minutes. */
static void test_places_spaced_behind_java_only(void **state)
{
    static const char name[] = "fd";
    static const char tq[] = "redisson_lock_timeout:{fd}";
    hilock_client *hc = hl_new_client(fx.server, NULL);
    hilock_client *wc = hl_new_client(
        fx.server, &(hl_client_opts){ .waiter_ms = WAITER_MS });
    hilock_lock *h = hl_new_fair_lock(hc, name);
    hilock_lock *w = hl_new_fair_lock(wc, name);
    static hl_acquire_rec wa[3];
    const uint64_t owners[3] = { OWNER_A, OWNER_B, OWNER_C };
    char f[3][FIELD_CAP], jf[FIELD_CAP];
    long long now, s[3], sj;
    hl_rpeer j;

    (void)state;
    hl_rpeer_init(&j, hc, name, "java-uuid");
    hl_rpeer_field(&j, 3, jf, sizeof jf);
    assert_status(hilock_lock_try_acquire(h, 0, LONG_MS), HILOCK_OK);
    for (int i = 0; i < 3; i++) {
        hilock_field(f[i], wc, owners[i]);
        hl_acquire_rec_init(&wa[i], NULL);
        assert_status(hilock_lock_acquire_async(w, owners[i],
                                                hl_widen(60000), LONG_MS, 0,
                                                hl_record_acquire, &wa[i],
                                                &wa[i].id),
                      HILOCK_OK);
        expect_llen(name, i < 2 ? i + 1 : i + 2);
        hl_expect_pending(wc, w, i + 1);
        if (i == 1) {
            assert_true(hl_rpeer_attempt(&j, 3, LONG_MS) >= 0);
            expect_llen(name, 3);
        }
    }
    now = hl_raw_server_ms(fx.server);
    for (int i = 0; i < 3; i++)
        s[i] = zscore_of(tq, f[i]);
    sj = zscore_of(tq, jf);
    for (int i = 0; i < 2; i++)
        if (s[i] <= now || s[i] > now + WAITER_MS)
            fail_msg("hilock waiter %d's place is %lld ms ahead, expected "
                     "within the waiter timeout %d", i + 1, s[i] - now,
                     WAITER_MS);
    /* The Java place is where the peer put it; the hilock place before
     * it may since have been renewed a little later, so no exact
     * spacing is asked of the two. */
    assert_true(sj > s[1]);
    if (s[2] < sj + HL_RPEER_DEFAULT_WAIT_MS)
        fail_msg("the hilock place behind the Java one is only %lld ms "
                 "behind it", s[2] - sj);

    for (int i = 0; i < 3; i++) {
        assert_status(hilock_lock_cancel(w, wa[i].id), HILOCK_OK);
        assert_status(hl_expect_acquire(&wa[i]), HILOCK_ECANCELED);
    }
    hl_rpeer_give_up(&j, 3);
    expect_llen(name, 0);
    assert_status(hilock_lock_release(h), HILOCK_OK);
    hl_free_lock(w);
    hl_free_lock(h);
    hl_free_client(wc);
    hl_free_client(hc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_read_release_beside_expired_java_reader, &fx),
        hl_lock_test(test_read_release_beside_live_java_reader, &fx),
        hl_lock_test(test_java_waiter_keeps_place, &fx),
        hl_lock_test(test_mixed_line_in_order, &fx),
        hl_lock_test(test_java_give_up_keeps_order, &fx),
        hl_lock_test(test_places_spaced_behind_java_only, &fx),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
