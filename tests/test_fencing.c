/* Fencing tokens against a real redis-server: they never go back, not
 * even when the server restarts without persistence and forgets the
 * counter; a reentry keeps its hold's token; and the counter stays one
 * that a Redisson client's INCR goes on from, in either direction.
 *
 * The fixture's servers run with no RDB or AOF, so a restart starts from
 * an empty dataset, as a cache-only deployment would.  What the server
 * holds is read over the fixture's own connections (redis_server.h),
 * never through the library under test. */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/lock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

/* ---- helpers ----------------------------------------------------------- */

/* Each test's server and forked children; see hl_lock_fixture. */
static hl_lock_fixture fx;

typedef hilock_lock *lock_maker(hilock_client *c, const char *name);

static const struct kind {
    const char *what;
    lock_maker *make;
} kinds[] = {
    {"reentrant", hl_new_lock},
    {"fair", hl_new_fair_lock},
    {"read", hl_new_read_lock},
    {"write", hl_new_write_lock},
};

#define NKINDS (sizeof kinds / sizeof kinds[0])

static void counter_key(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "redisson_lock_token:{%s}", name);
}

/* A decimal integer as Redis and Redisson write one: digits only, no
 * sign, exponent or fraction, which a client's INCR could not take. */
static uint64_t parse_plain(const char *s, const char *what)
{
    char *end;

    if (*s < '1' || *s > '9')
        fail_msg("%s is \"%s\", not a plain positive integer", what, s);
    uint64_t v = strtoull(s, &end, 10);
    if (*end != '\0')
        fail_msg("%s is \"%s\", not a plain positive integer", what, s);
    return v;
}

/* The lock's counter as the server holds it; it must exist. */
static uint64_t counter(const char *name)
{
    char key[96], value[64];

    counter_key(key, sizeof key, name);
    if (!hl_raw_bulk(fx.server, value, sizeof value, "GET", key,
                     (char *)NULL))
        fail_msg("%s does not exist", key);
    return parse_plain(value, key);
}

static void set_counter(const char *name, const char *value)
{
    char key[96], reply[64];

    counter_key(key, sizeof key, name);
    if (hl_raw_cmd(fx.server, reply, sizeof reply, "SET", key, value,
                   (char *)NULL) != '+')
        fail_msg("SET %s %s: %s", key, value, reply);
}

/* What a Redisson client does to draw a token. */
static uint64_t java_incr(const char *name)
{
    char key[96];

    counter_key(key, sizeof key, name);
    return (uint64_t)hl_raw_int(fx.server, "INCR", key, (char *)NULL);
}

/* The server's clock in us, from TIME. */
static uint64_t server_us(void)
{
    char reply[128], sec[32], usec[32];
    const char *p = reply;

    hl_raw_cmd(fx.server, reply, sizeof reply, "TIME", (char *)NULL);
    assert_int_equal(hl_raw_parse_array(&p), 2);
    hl_raw_parse_bulk(&p, sec, sizeof sec);
    hl_raw_parse_bulk(&p, usec, sizeof usec);
    return strtoull(sec, NULL, 10) * 1000000 + strtoull(usec, NULL, 10);
}

/* A fenced hold, taken at once since nobody else holds the name. */
static uint64_t take(hilock_lock *l, const char *what)
{
    uint64_t token = 0;
    int rc = hilock_lock_acquire_fenced(l, 0, HILOCK_LEASE_WATCHDOG, &token);

    if (rc != HILOCK_OK)
        fail_msg("%s acquire: %s (%s)", what, hilock_errname(rc),
                 hilock_last_error());
    if (token == 0)
        fail_msg("%s acquire came without a token", what);
    return token;
}

/* One fenced hold, let go at once; returns its token. */
static uint64_t draw(hilock_lock *l, const char *what)
{
    uint64_t token = take(l, what);

    assert_status(hilock_lock_release(l), HILOCK_OK);
    return token;
}

/* ---- a restart without persistence ------------------------------------- */

#define DRAWS_BEFORE 5

/* Every kind on a name of its own.  The server forgets each counter; the
 * next token of each name must still be above every one it had. */
static void test_restart_without_persistence(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    uint64_t before[NKINDS] = {0};
    char key[96];

    (void)state;
    for (size_t k = 0; k < NKINDS; k++) {
        hilock_lock *l = kinds[k].make(c, kinds[k].what);

        for (int i = 0; i < DRAWS_BEFORE; i++) {
            uint64_t t = draw(l, kinds[k].what);

            if (t > before[k])
                before[k] = t;
        }
        hl_free_lock(l);
    }
    hl_free_client(c);
    hl_fixture_restart(fx.server);
    /* The premise: the counters are gone, not reloaded from disk. */
    for (size_t k = 0; k < NKINDS; k++) {
        counter_key(key, sizeof key, kinds[k].what);
        if (hl_raw_exists(fx.server, key) != 0)
            fail_msg("%s survived the restart", key);
    }
    c = hl_new_client(fx.server, NULL);
    for (size_t k = 0; k < NKINDS; k++) {
        hilock_lock *l = kinds[k].make(c, kinds[k].what);
        uint64_t t = draw(l, kinds[k].what);

        if (t <= before[k])
            fail_msg("%s: token %" PRIu64 " after the restart, but %" PRIu64
                     " before it", kinds[k].what, t, before[k]);
        hl_free_lock(l);
    }
    hl_free_client(c);
}

/* A hold that the restart took away: joining it again finds nothing on
 * the server, so it is a first hold, and must not reuse the old token. */
static void test_join_after_restart_draws_anew(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "rejoin");
    uint64_t first, token = 0;
    int rc;

    (void)state;
    first = take(l, "first");
    assert_int_equal(take(l, "reentry"), first);
    assert_status(hilock_lock_release(l), HILOCK_OK);
    /* Still held once, as far as the client knows. */
    hl_fixture_restart(fx.server);
    assert_int_equal(hl_raw_exists(fx.server, "rejoin"), 0);
    /* The client may or may not have seen the loss by now; the wait
     * covers its reconnection either way. */
    rc = hilock_lock_acquire_fenced(l, hl_widen(10000), HILOCK_LEASE_WATCHDOG,
                                    &token);
    if (rc != HILOCK_OK)
        fail_msg("acquire after the restart: %s (%s)", hilock_errname(rc),
                 hilock_last_error());
    if (token <= first)
        fail_msg("token %" PRIu64 " after the restart, %" PRIu64 " before",
                 token, first);
    /* Whether this reports the lost hold is not the point here. */
    (void)hilock_lock_release(l);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- one counter with Redisson ----------------------------------------- */

static void test_counter_shared_with_incr(void **state)
{
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l = hl_new_lock(c, "java");
    uint64_t t, j, lo, hi;

    (void)state;
    /* A fresh counter starts at the clock, written so INCR takes it. */
    lo = server_us();
    t = draw(l, "first");
    hi = server_us();
    if (t < lo || t > hi)
        fail_msg("first token %" PRIu64 " outside the server's clock "
                 "%" PRIu64 "..%" PRIu64, t, lo, hi);
    assert_int_equal(counter("java"), t);
    j = java_incr("java");
    assert_int_equal(j, t + 1);
    t = draw(l, "after INCR");
    if (t <= j)
        fail_msg("token %" PRIu64 " after Redisson's %" PRIu64, t, j);
    assert_int_equal(counter("java"), t);

    /* A counter ahead of the clock (a busy Redisson client, say) simply
     * counts on: the clock must not pull it back. */
    set_counter("java", "4000000000000000");
    assert_int_equal(draw(l, "ahead"), 4000000000000001ULL);
    assert_int_equal(java_incr("java"), 4000000000000002ULL);
    assert_int_equal(draw(l, "ahead again"), 4000000000000003ULL);

    /* A counter behind the clock, as one from before this scheme, or one
     * a replica had only in part: the clock lifts it. */
    set_counter("java", "7");
    lo = server_us();
    t = draw(l, "behind");
    hi = server_us();
    if (t < lo || t > hi)
        fail_msg("token %" PRIu64 " over a counter of 7 outside the "
                 "server's clock %" PRIu64 "..%" PRIu64, t, lo, hi);
    assert_int_equal(counter("java"), t);
    assert_int_equal(java_incr("java"), t + 1);
    hl_free_lock(l);
    hl_free_client(c);
}

/* ---- many holds of one name -------------------------------------------- */

/* Every kind in turn on one name, with Redisson's INCRs in between and
 * reentries inside some holds: every token drawn is above the last. */
static void test_tokens_increase_over_cycles(void **state)
{
    int cycles = hl_scaled(400, 40);
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_lock *l[NKINDS];
    uint64_t last = 0, t;

    (void)state;
    for (size_t k = 0; k < NKINDS; k++)
        l[k] = kinds[k].make(c, "cycle");
    for (int i = 0; i < cycles; i++) {
        size_t k = (size_t)i % NKINDS;

        t = take(l[k], kinds[k].what);
        if (t <= last)
            fail_msg("%s hold %d: token %" PRIu64 " after %" PRIu64,
                     kinds[k].what, i, t, last);
        last = t;
        if (i % 5 == 0) {
            assert_int_equal(take(l[k], kinds[k].what), t);
            assert_status(hilock_lock_release(l[k]), HILOCK_OK);
        }
        assert_status(hilock_lock_release(l[k]), HILOCK_OK);
        if (i % 7 == 0) {
            t = java_incr("cycle");
            if (t <= last)
                fail_msg("INCR gave %" PRIu64 " after %" PRIu64, t, last);
            last = t;
        }
    }
    assert_int_equal(counter("cycle"), last);
    for (size_t k = 0; k < NKINDS; k++)
        hl_free_lock(l[k]);
    hl_free_client(c);
}

int main(void)
{
#define T(fn) hl_lock_test(fn, &fx)
    const struct CMUnitTest tests[] = {
        T(test_restart_without_persistence),
        T(test_join_after_restart_draws_anew),
        T(test_counter_shared_with_incr),
        T(test_tokens_increase_over_cycles),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
