/* Values on the server that hilock did not write, put there directly as
 * redis-cli would: a count (a semaphore's, a latch's, a hold's, a
 * reader's) is read exactly as the 64-bit integer it is, or refused with
 * HILOCK_EPROTO and a detail that quotes the value, never misread
 * through Lua's doubles; a permit's expiry or a fair place that is
 * negative, infinite or out of reach neither spins a waiter nor
 * overflows a status; a fencing counter past 2^53 still gives every hold
 * a token of its own; hilock status and run read the same values as
 * strictly. */
/* ctest-timeout: 120 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

/* Counts no hilock or Redisson client writes: not canonical decimal
 * integers, or outside 64 bits. */
static const char *const not_counts[] = {
    "5.5", "9223372036854775808", "-9223372036854775809",
    "99999999999999999999", "007", "+5", " 5", "1e3", "abc", "",
};

static void set_key(const char *key, const char *value)
{
    char reply[64];
    assert_int_equal(hl_raw_cmd(fx.server, reply, sizeof reply, "SET", key,
                                value, (char *)NULL),
                     '+');
}

static void zadd(const char *key, const char *score, const char *member)
{
    assert_int_equal(hl_raw_int(fx.server, "ZADD", key, score, member,
                                (char *)NULL),
                     1);
}

/* The key's value is still the one the test wrote. */
static void assert_kept(const char *key, const char *value)
{
    char now[128];
    assert_true(hl_raw_bulk(fx.server, now, sizeof now, "GET", key,
                            (char *)NULL));
    assert_string_equal(now, value);
}

/* HILOCK_EPROTO, with a detail that quotes the value. */
#define assert_refused(call, value)                                        \
    do {                                                                   \
        assert_status((call), HILOCK_EPROTO);                              \
        char quoted_[128];                                                 \
        snprintf(quoted_, sizeof quoted_, "\"%s\"", (value));              \
        if (strstr(hilock_last_error(), quoted_) == NULL)                  \
            fail_msg("the detail \"%s\" does not name %s",                 \
                     hilock_last_error(), quoted_);                        \
    } while (0)

/* Scripts the server ran, however they were sent. */
static long long scripts_run(void)
{
    return hl_fixture_calls(fx.server, "evalsha") +
           hl_fixture_calls(fx.server, "eval");
}

/* ---- semaphore counts --------------------------------------------------- */

/* Counts beyond 2^53 are exact integers in Redis and stay exact here. */
static void test_semaphore_count_exact(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "fv-big", false);
    int64_t v = 0;

    set_key("fv-big", "9223372036854775807");
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_true(v == INT64_MAX);

    set_key("fv-big", "9007199254740993");
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_true(v == INT64_C(9007199254740993));
    assert_status(hilock_semaphore_try_acquire(s, 1, 0), HILOCK_OK);
    assert_kept("fv-big", "9007199254740992");
    assert_status(hilock_semaphore_add(s, 3, &v), HILOCK_OK);
    assert_true(v == INT64_C(9007199254740995));
    assert_status(hilock_semaphore_release(s, 2), HILOCK_OK);
    assert_kept("fv-big", "9007199254740997");
    assert_status(hilock_semaphore_drain(s, &v), HILOCK_OK);
    assert_true(v == INT64_C(9007199254740997));
    assert_kept("fv-big", "0");

    set_key("fv-big", "-9223372036854775807");
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_true(v == -INT64_MAX);
    hl_semaphore_destroy_any(s);

    /* The expirable kind's calls, and its acquire. */
    s = hl_new_semaphore(c, "fv-bigp", true);
    char id[HILOCK_PERMIT_ID_MAX];
    set_key("fv-bigp", "9007199254740993");
    assert_status(hilock_permit_acquire(hl_permits_of(s), 0, 60000, id),
                  HILOCK_OK);
    assert_kept("fv-bigp", "9007199254740992");
    assert_status(hilock_semaphore_available(s, &v), HILOCK_OK);
    assert_true(v == INT64_C(9007199254740992));
    assert_status(hilock_permit_release(hl_permits_of(s), id), HILOCK_OK);
    assert_kept("fv-bigp", "9007199254740993");
    assert_status(hilock_semaphore_add(s, 2, &v), HILOCK_OK);
    assert_true(v == INT64_C(9007199254740995));
    assert_status(hilock_semaphore_drain(s, &v), HILOCK_OK);
    assert_true(v == INT64_C(9007199254740995));
    hl_semaphore_destroy_any(s);
    hl_free_client(c);
}

/* A release tells Redisson's listeners the new count in plain digits,
 * which they parse as a long, exactly: a count the script holds as a
 * Lua number (a double) below 2^53, as text from there. */
static void test_semaphore_release_announces_digits(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "fv-digits", false);
    hl_plain_sub *java = hl_plain_sub_open(fx.server,
                                           "redisson_sc:{fv-digits}");
    static const char *const counts[][2] = {
        {"99999999999999", "100000000000000"},
        {"123456789012344", "123456789012345"},
        {"9007199254740990", "9007199254740991"},
        {"9007199254740992", "9007199254740993"},
        {"9223372036854775806", "9223372036854775807"},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        set_key("fv-digits", counts[i][0]);
        assert_status(hilock_semaphore_release(s, 1), HILOCK_OK);
        char msg[64];
        assert_true(hl_plain_sub_next(java, msg, sizeof msg, 5000));
        assert_string_equal(msg, counts[i][1]);
        assert_kept("fv-digits", counts[i][1]);
    }
    hl_plain_sub_close(java);
    hl_semaphore_destroy_any(s);
    hl_free_client(c);
}

/* A count that is no 64-bit integer is refused by every call, which
 * changes nothing. */
static void test_semaphore_count_refused(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "fv-bad", false);
    hilock_semaphore *p = hl_new_semaphore(c, "fv-badp", true);
    int64_t v = 0;
    char id[HILOCK_PERMIT_ID_MAX];

    for (size_t i = 0; i < sizeof not_counts / sizeof not_counts[0]; i++) {
        const char *bad = not_counts[i];
        set_key("fv-bad", bad);
        assert_refused(hilock_semaphore_available(s, &v), bad);
        assert_refused(hilock_semaphore_try_acquire(s, 1, 0), bad);
        assert_refused(hilock_semaphore_release(s, 1), bad);
        assert_refused(hilock_semaphore_add(s, 1, &v), bad);
        assert_refused(hilock_semaphore_drain(s, &v), bad);
        assert_kept("fv-bad", bad);

        set_key("fv-badp", bad);
        assert_refused(hilock_semaphore_available(p, &v), bad);
        assert_refused(hilock_permit_acquire(hl_permits_of(p), 0, 60000, id),
                       bad);
        assert_refused(hilock_semaphore_set(p, 3), bad);
        assert_refused(hilock_semaphore_add(p, 1, &v), bad);
        assert_kept("fv-badp", bad);
        assert_int_equal(hl_raw_exists(fx.server, "{fv-badp}:timeout"), 0);
    }
    hl_semaphore_destroy_any(s);
    hl_semaphore_destroy_any(p);
    hl_free_client(c);
}

/* ---- permits' expiry ---------------------------------------------------- */

/* A permit whose expiry lies before the epoch has expired: the acquire
 * takes it back and gets it, in a bounded number of scripts. */
static void test_permit_expired_before_epoch(void **state)
{
    (void)state;
    static const char *const scores[] = {"-5", "-inf", "-1e300"};
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "fv-neg", true);
    char id[HILOCK_PERMIT_ID_MAX];

    for (size_t i = 0; i < sizeof scores / sizeof scores[0]; i++) {
        set_key("fv-neg", "0");
        zadd("{fv-neg}:timeout", scores[i], "foreign-permit");
        long long before = scripts_run();
        int rc =
            hilock_permit_acquire(hl_permits_of(s), hl_widen(1500), 60000, id);
        long long ran = scripts_run() - before;
        if (ran > 3)
            fail_msg("score %s: %lld scripts for one acquire (%s)",
                     scores[i], ran, hilock_errname(rc));
        assert_status(rc, HILOCK_OK);
        assert_int_equal(hl_raw_int(fx.server, "ZCARD", "{fv-neg}:timeout",
                                    (char *)NULL),
                         1);
        assert_status(hilock_permit_release(hl_permits_of(s), id), HILOCK_OK);
        assert_kept("fv-neg", "1");
        assert_int_equal(hl_raw_int(fx.server, "DEL", "{fv-neg}:timeout",
                                    (char *)NULL),
                         0);
    }
    hl_semaphore_destroy_any(s);
    hl_free_client(c);
}

/* A permit that never expires, or not within any wait: the acquire waits
 * for a release, and asks the server a bounded number of times. */
static void test_permit_expiry_out_of_reach(void **state)
{
    (void)state;
    static const char *const scores[] = {"inf", "1e300",
                                         "9223372036854775807"};
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_semaphore *s = hl_new_semaphore(c, "fv-far", true);
    char id[HILOCK_PERMIT_ID_MAX];

    for (size_t i = 0; i < sizeof scores / sizeof scores[0]; i++) {
        set_key("fv-far", "0");
        zadd("{fv-far}:timeout", scores[i], "foreign-permit");
        long long before = scripts_run();
        int rc = hilock_permit_acquire(hl_permits_of(s), 300, 60000, id);
        long long ran = scripts_run() - before;
        if (ran > 4)
            fail_msg("score %s: %lld scripts during a wait of 300 ms (%s)",
                     scores[i], ran, hilock_errname(rc));
        assert_status(rc, HILOCK_EBUSY);
        /* Given back, it is free for the next acquire. */
        assert_status(hilock_permit_release(hl_permits_of(s), "foreign-permit"),
                      HILOCK_OK);
        assert_status(hilock_permit_acquire(hl_permits_of(s), 0, 60000, id),
                      HILOCK_OK);
        assert_status(hilock_permit_release(hl_permits_of(s), id), HILOCK_OK);
        assert_int_equal(hl_raw_int(fx.server, "DEL", "{fv-far}:timeout",
                                    (char *)NULL),
                         0);
    }
    hl_semaphore_destroy_any(s);
    hl_free_client(c);
}

/* ---- hilock status and run --------------------------------------------- */

/* hilock status --kind semaphore NAME: its exit status, its output in
 * out. */
static int status_json(const char *name, char *out, size_t cap)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(fx.server));
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "status",
                          "--kind", "semaphore", name, NULL};
    return hl_run(argv, out, cap, hl_widen(20000));
}

static void expect_in(const char *out, const char *want)
{
    if (strstr(out, want) == NULL)
        fail_msg("expected %s in: %s", want, out);
}

/* Expiries out of reach show as never (-1), those before the epoch as
 * run out (0); a count shows exactly, and a value that is no count is
 * refused as bad data (exit 65), by its value. */
static void test_status_semaphore(void **state)
{
    (void)state;
    char out[2048];

    set_key("fv-st", "9223372036854775807");
    zadd("{fv-st}:timeout", "inf", "p-inf");
    assert_int_equal(status_json("fv-st", out, sizeof out), 0);
    expect_in(out, "\"available\":9223372036854775807,");
    expect_in(out, "{\"id\":\"p-inf\",\"ttl_ms\":-1}");

    set_key("fv-st", "99999999999999999999");
    assert_int_equal(status_json("fv-st", out, sizeof out), 65);
    expect_in(out, "\"99999999999999999999\"");

    assert_int_equal(hl_raw_int(fx.server, "DEL", "fv-st", (char *)NULL), 1);
    zadd("{fv-st}:timeout", "-inf", "p-minus-inf");
    zadd("{fv-st}:timeout", "1e300", "p-far");
    zadd("{fv-st}:timeout", "-1e300", "p-before");
    zadd("{fv-st}:timeout", "9223372036854775807", "p-max");
    assert_int_equal(status_json("fv-st", out, sizeof out), 0);
    expect_in(out, "\"available\":null,");
    expect_in(out, "{\"id\":\"p-minus-inf\",\"ttl_ms\":0}");
    expect_in(out, "{\"id\":\"p-before\",\"ttl_ms\":0}");
    expect_in(out, "{\"id\":\"p-far\",\"ttl_ms\":-1}");
    expect_in(out, "{\"id\":\"p-max\",\"ttl_ms\":-1}");
    expect_in(out, "{\"id\":\"p-inf\",\"ttl_ms\":-1}");
}

/* hilock run refuses a name whose count or fencing counter no client
 * writes as bad data (exit 65), quoting it, and runs nothing. */
static void test_cli_run_refused(void **state)
{
    (void)state;
    char url[64], out[2048];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(fx.server));

    set_key("fv-run", "5.5");
    const char *permits[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                             "--permits", "2", "fv-run", "--",
                             "echo", "ran", NULL};
    assert_int_equal(hl_run(permits, out, sizeof out, hl_widen(20000)), 65);
    expect_in(out, "\"5.5\"");
    if (strstr(out, "ran\n") != NULL)
        fail_msg("the command ran: %s", out);

    set_key("redisson_lock_token:{fv-run2}", "1e3");
    const char *fenced[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                            "--fence-env", "fv-run2", "--",
                            "echo", "ran", NULL};
    assert_int_equal(hl_run(fenced, out, sizeof out, hl_widen(20000)), 65);
    expect_in(out, "\"1e3\"");
    if (strstr(out, "ran\n") != NULL)
        fail_msg("the command ran: %s", out);
    assert_int_equal(hl_raw_exists(fx.server, "fv-run2"), 0);
}

/* ---- latch counts ------------------------------------------------------- */

static void test_latch_count(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_latch *l = NULL;
    assert_status(hilock_latch_create(&l, c, "fv-latch"), HILOCK_OK);
    int64_t v = 0;
    bool opened = true;

    /* Past 2^53 a count is still exact. */
    set_key("fv-latch", "9223372036854775807");
    assert_status(hilock_latch_count(l, &v), HILOCK_OK);
    assert_true(v == INT64_MAX);
    assert_status(hilock_latch_count_down(l, &v), HILOCK_OK);
    assert_true(v == INT64_MAX - 1);
    assert_kept("fv-latch", "9223372036854775806");

    for (size_t i = 0; i < sizeof not_counts / sizeof not_counts[0]; i++) {
        const char *bad = not_counts[i];
        set_key("fv-latch", bad);
        assert_refused(hilock_latch_count(l, &v), bad);
        assert_refused(hilock_latch_await(l, 0, &opened), bad);
        assert_false(opened);
        assert_refused(hilock_latch_count_down(l, &v), bad);
        assert_kept("fv-latch", bad);
    }
    /* A latch count is never negative (Redisson's count down deletes the
     * latch at zero): refused, and left exactly as it was, INT64_MIN
     * included, which no count down may take lower. */
    static const char *const negatives[] = {"-1", "-5",
                                            "-9223372036854775808"};
    for (size_t i = 0; i < sizeof negatives / sizeof negatives[0]; i++) {
        const char *bad = negatives[i];
        set_key("fv-latch", bad);
        assert_refused(hilock_latch_count(l, &v), bad);
        assert_refused(hilock_latch_count_down(l, &v), bad);
        assert_kept("fv-latch", bad);
    }
    hilock_latch_destroy(l);
    hl_free_client(c);
}

/* ---- locks -------------------------------------------------------------- */

/* A fencing counter past 2^53 still gives each hold a token greater than
 * the last, exactly. */
static void test_fencing_counter_past_2_53(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(c, "fv-tok");
    uint64_t t1 = 0, t2 = 0;

    set_key("redisson_lock_token:{fv-tok}", "9007199254740994");
    assert_status(hilock_lock_acquire_fenced(lock, 0, 60000, &t1),
                  HILOCK_OK);
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    assert_status(hilock_lock_acquire_fenced(lock, 0, 60000, &t2),
                  HILOCK_OK);
    assert_status(hilock_lock_release(lock), HILOCK_OK);
    if (t1 != UINT64_C(9007199254740995) || t2 != UINT64_C(9007199254740996))
        fail_msg("tokens %" PRIu64 " and %" PRIu64 ", expected "
                 "9007199254740995 and 9007199254740996", t1, t2);

    /* A counter that is not an integer: refused, and nothing held. */
    set_key("redisson_lock_token:{fv-tok}", "5.5");
    assert_refused(hilock_lock_acquire_fenced(lock, 0, 60000, &t1), "5.5");
    assert_int_equal(hl_raw_exists(fx.server, "fv-tok"), 0);
    hl_free_lock(lock);
    hl_free_client(c);
}

/* "<client id>:<owner>", the calling thread's field in a lock's hash. */
static void thread_field(hilock_client *c, char *out, size_t cap)
{
    snprintf(out, cap, "%s:%" PRIu64, hilock_client_id(c),
             hilock_thread_owner());
}

/* A hold count beyond 64 bits is no count: the query refuses it, a
 * status shows no hold for it (its documented reading of a count no lock
 * wrote), and the acquire refuses to count on from it, as it does from
 * one whose next would pass 2^53. */
static void test_hold_count(void **state)
{
    (void)state;
    static const char *const not_holds[] = {
        "99999999999999999999", "9223372036854775806", "9007199254740991",
        "5.5", "0", "-3",
    };
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *lock = hl_new_lock(c, "fv-hold");
    char field[128], now[64];
    int64_t n = 0;

    thread_field(c, field, sizeof field);
    assert_int_equal(hl_raw_int(fx.server, "HSET", "fv-hold", field,
                                "99999999999999999999", (char *)NULL),
                     1);
    assert_refused(hilock_lock_hold_count(lock, &n), "99999999999999999999");

    hilock_lock_status *st = NULL;
    assert_status(hilock_lock_status_get(lock, &st), HILOCK_OK);
    assert_int_equal(st->holders_len, 1);
    assert_true(st->holders[0].count == 0);
    hilock_lock_status_free(st);

    for (size_t i = 0; i < sizeof not_holds / sizeof not_holds[0]; i++) {
        const char *bad = not_holds[i];
        assert_int_equal(hl_raw_int(fx.server, "HSET", "fv-hold", field, bad,
                                    (char *)NULL),
                         0);
        assert_refused(hilock_lock_try_acquire(lock, 0, 60000), bad);
        assert_true(hl_raw_bulk(fx.server, now, sizeof now, "HGET",
                                "fv-hold", field, (char *)NULL));
        assert_string_equal(now, bad);
    }
    hl_free_lock(lock);
    hl_free_client(c);
}

/* A fair line's place scored beyond reach has no time that a status can
 * show: it reads as a place without one; one scored before the epoch as
 * one run out.  A waiter behind a place that never runs out waits for a
 * message, asking the server a bounded number of times. */
static void test_fair_place_out_of_reach(void **state)
{
    (void)state;
    hl_client_opts opts = {.waiter_ms = 60000};
    hilock_client *c = hl_new_client(fx.server, &opts);
    hilock_lock *lock = hl_new_fair_lock(c, "fv-fair");

    assert_int_equal(hl_raw_int(fx.server, "RPUSH",
                                "redisson_lock_queue:{fv-fair}", "w-inf",
                                "w-far", "w-gone", (char *)NULL),
                     3);
    zadd("redisson_lock_timeout:{fv-fair}", "inf", "w-inf");
    zadd("redisson_lock_timeout:{fv-fair}", "1e300", "w-far");
    zadd("redisson_lock_timeout:{fv-fair}", "-inf", "w-gone");
    hilock_lock_status *st = NULL;
    assert_status(hilock_lock_status_get(lock, &st), HILOCK_OK);
    assert_int_equal(st->waiters_len, 3);
    for (size_t i = 0; i < 2; i++)
        if (st->waiters[i].expires)
            fail_msg("waiter %s expires in %" PRId64 " ms",
                     st->waiters[i].owner, st->waiters[i].expires_in_ms);
    assert_true(st->waiters[2].expires);
    assert_true(st->waiters[2].expires_in_ms < 0);
    hilock_lock_status_free(st);

    long long before = scripts_run();
    int rc = hilock_lock_try_acquire(lock, 300, 60000);
    long long ran = scripts_run() - before;
    if (ran > 4)
        fail_msg("%lld scripts during a wait of 300 ms (%s)", ran,
                 hilock_errname(rc));
    assert_status(rc, HILOCK_EBUSY);
    hl_free_lock(lock);
    hl_free_client(c);
}

/* A reader's count that no client writes: a writer is refused, since
 * whether that reader lives cannot be told, and a reader's release beside
 * it is not left half done. */
static void test_rwlock_reader_count(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *other = hl_new_client(fx.server, NULL);
    hilock_lock *r = hl_new_read_lock(c, "fv-rw");
    hilock_lock *w = hl_new_write_lock(other, "fv-rw");
    char field[128];

    assert_status(hilock_lock_try_acquire(r, 0, 60000), HILOCK_OK);
    assert_int_equal(hl_raw_int(fx.server, "HSET", "fv-rw", "java-reader",
                                "abc", (char *)NULL),
                     1);
    assert_refused(hilock_lock_try_acquire(w, 0, 60000), "abc");
    assert_status(hilock_lock_release(r), HILOCK_OK);
    thread_field(c, field, sizeof field);
    assert_int_equal(hl_raw_int(fx.server, "HEXISTS", "fv-rw", field,
                                (char *)NULL),
                     0);
    bool held = true;
    assert_status(hilock_lock_is_held_by_me(r, &held), HILOCK_OK);
    assert_false(held);
    hl_free_lock(r);
    hl_free_lock(w);
    hl_free_client(other);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_semaphore_count_exact),
        T(test_semaphore_release_announces_digits),
        T(test_semaphore_count_refused),
        T(test_permit_expired_before_epoch),
        T(test_permit_expiry_out_of_reach),
        T(test_status_semaphore),
        T(test_cli_run_refused),
        T(test_latch_count),
        T(test_fencing_counter_past_2_53),
        T(test_hold_count),
        T(test_fair_place_out_of_reach),
        T(test_rwlock_reader_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
