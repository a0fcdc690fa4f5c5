/* Pure logic of the core, without a server: backoff, the byte buffer, the
 * hash map, the bounded reply reader, the live-handle registry, the clock
 * and the time arithmetic that must not wrap, and the strict reading of
 * decimal integers. */
/* ctest-timeout: 60 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/transport/keyslot.h"
#include "core/base/alloc.h"
#include "core/base/buf.h"
#include "core/runtime/client_state.h"
#include "core/transport/command_slot.h"
#include "core/transport/conn.h"
#include "core/base/handle.h"
#include "core/engine/engine_internal.h"
#include "core/base/map.h"
#include "core/base/monotime.h"
#include "core/config/option_values.h"
#include "core/transport/reply.h"
#include "core/transport/resp.h"

/* ---- owner turns against a model of their lines ------------------------ */

#define TT_OWNERS 40
#define TT_TURNS 512

typedef struct tt_turn {
    hl_turn turn; /* first */
    int id;
    uint64_t owner;
    bool listed;
} tt_turn;

static tt_turn tt[TT_TURNS];
static int tt_went[TT_TURNS];
/* The model: each owner's line, oldest first. */
static int tt_line[TT_OWNERS][TT_TURNS];
static int tt_len[TT_OWNERS];

static void tt_go(hl_turn *t) { tt_went[((tt_turn *)(void *)t)->id]++; }

static uint64_t tt_owner(int o)
{
    /* Sequential ids and ids far apart, as thread owners and async
     * callers' ids come. */
    return o % 2 ? (uint64_t)o : (uint64_t)o << 40 | UINT64_C(1) << 20;
}

static int tt_owner_index(uint64_t owner)
{
    for (int o = 0; o < TT_OWNERS; o++)
        if (tt_owner(o) == owner)
            return o;
    fail_msg("unknown owner");
    return -1;
}

static int tt_pick(unsigned *seed, bool listed)
{
    int start = (int)(rand_r(seed) % TT_TURNS);
    for (int i = 0; i < TT_TURNS; i++) {
        int id = (start + i) % TT_TURNS;
        if (tt[id].listed == listed)
            return id;
    }
    return -1;
}

static void tt_check(void)
{
    for (int id = 0; id < TT_TURNS; id++) {
        assert_int_equal(tt[id].turn.listed, tt[id].listed);
        if (!tt[id].listed) {
            assert_false(tt[id].turn.active);
            continue;
        }
        int o = tt_owner_index(tt[id].owner);
        assert_int_equal(tt[id].turn.owner, tt[id].owner);
        assert_int_equal(tt[id].turn.active, tt_line[o][0] == id);
    }
}

static void test_turns_follow_the_model(void **state)
{
    (void)state;
    hilock_lock *lock = calloc(1, sizeof *lock + 1);
    unsigned seed = 12345;
    int went_before[TT_TURNS];

    assert_non_null(lock);
    memset(tt, 0, sizeof tt);
    memset(tt_went, 0, sizeof tt_went);
    memset(tt_len, 0, sizeof tt_len);
    for (int id = 0; id < TT_TURNS; id++)
        tt[id].id = id;
    for (int step = 0; step < 200000; step++) {
        int what = (int)(rand_r(&seed) % 3);
        int id = tt_pick(&seed, what != 0);
        memcpy(went_before, tt_went, sizeof went_before);
        if (what == 0 && id >= 0) {
            int o = (int)(rand_r(&seed) % TT_OWNERS);
            tt[id].owner = tt_owner(o);
            tt[id].listed = true;
            bool now = hl_turn_take(lock, &tt[id].turn, tt[id].owner, tt_go);
            assert_int_equal(now, tt_len[o] == 0);
            tt_line[o][tt_len[o]++] = id;
        } else if (what == 1 && id >= 0) {
            int o = tt_owner_index(tt[id].owner);
            int at = 0;
            while (tt_line[o][at] != id)
                at++;
            memmove(&tt_line[o][at], &tt_line[o][at + 1],
                    (size_t)(tt_len[o] - at - 1) * sizeof(int));
            tt_len[o]--;
            tt[id].listed = false;
            hl_turn_end(lock, &tt[id].turn);
            /* Only the owner's next request is told, and only when the
             * turn was the one ending. */
            if (at == 0 && tt_len[o] > 0)
                went_before[tt_line[o][0]]++;
        } else if (what == 2 && id >= 0) {
            int to = tt_pick(&seed, false);
            if (to < 0)
                continue;
            int o = tt_owner_index(tt[id].owner);
            int at = 0;
            while (tt_line[o][at] != id)
                at++;
            /* A give-back takes its attempt's place, ahead of requests
             * that queued meanwhile. */
            tt_line[o][at] = to;
            tt[to].owner = tt[id].owner;
            tt[to].listed = true;
            tt[id].listed = false;
            hl_turn_pass(lock, &tt[id].turn, &tt[to].turn, tt_go);
        }
        assert_memory_equal(went_before, tt_went, sizeof went_before);
        if (step % 64 == 0)
            tt_check();
    }
    tt_check();
    /* Every line ends; the table found each owner's line by its owner. */
    for (int id = 0; id < TT_TURNS; id++)
        if (tt[id].listed) {
            tt[id].listed = false;
            hl_turn_end(lock, &tt[id].turn);
        }
    hl_lock_rare *r = hl_lock_rare_peek(lock);
    assert_non_null(r);
    assert_int_equal(r->turn_lines, 0);
    assert_true(r->turn_table != NULL);
    assert_null(lock->turns);
    hl_free(r->turn_table);
    hl_free(r);
    free(lock);
}

static void test_backoff_doubles_and_caps(void **state)
{
    (void)state;
    hl_monotime min = HL_MS(50), max = HL_MS(5000);
    /* unit01 = 0 gives the lower edge d/2, just below 1 the upper edge d. */
    assert_int_equal(hl_backoff_delay(min, max, 0, 0.0), HL_MS(25));
    assert_int_equal(hl_backoff_delay(min, max, 1, 0.0), HL_MS(50));
    assert_int_equal(hl_backoff_delay(min, max, 3, 0.0), HL_MS(200));
    assert_true(hl_backoff_delay(min, max, 3, 0.999999) <= HL_MS(400));
    assert_true(hl_backoff_delay(min, max, 3, 0.999999) > HL_MS(399));
    /* Far past the cap the delay stays within [max/2, max]. */
    for (int attempt = 7; attempt < 64; attempt++) {
        hl_monotime lo = hl_backoff_delay(min, max, attempt, 0.0);
        hl_monotime hi = hl_backoff_delay(min, max, attempt, 0.999999);
        assert_int_equal(lo, HL_MS(2500));
        assert_true(hi <= max);
    }
}

static void test_buf_append_consume(void **state)
{
    (void)state;
    hl_buf b = {0};
    char chunk[1000];
    for (int i = 0; i < 1000; i++)
        chunk[i] = (char)i;
    size_t total = 0;
    for (int round = 0; round < 100; round++) {
        assert_int_equal(hl_buf_append(&b, chunk, sizeof chunk), 0);
        total += sizeof chunk;
        /* Consume a little less than appended so data keeps sliding. */
        hl_buf_consume(&b, 900);
        total -= 900;
        assert_int_equal(hl_buf_len(&b), total);
    }
    /* What is left must be the tail of the byte pattern, in order. */
    const unsigned char *p = (const unsigned char *)hl_buf_head(&b);
    size_t offset = (100 * 1000 - total) % 1000;
    for (size_t i = 0; i < total; i++)
        assert_int_equal(p[i], (unsigned char)((offset + i) % 1000));
    hl_buf_consume(&b, total);
    assert_int_equal(hl_buf_len(&b), 0);
    hl_buf_free(&b);
}

/* A buffer that grew in a burst lets its memory go once drained; a small
 * one keeps its memory for the next write. */
static void test_buf_drained_burst_lets_go(void **state)
{
    (void)state;
    hl_buf b = {0};
    static char burst[300 * 1024];
    memset(burst, 'x', sizeof burst);
    assert_int_equal(hl_buf_append(&b, burst, sizeof burst), 0);
    assert_true(b.cap >= sizeof burst);
    hl_buf_consume(&b, 1000);
    assert_non_null(b.data); /* not drained yet */
    hl_buf_consume(&b, sizeof burst - 1000);
    assert_null(b.data);
    assert_int_equal(b.cap, 0);
    assert_int_equal(hl_buf_len(&b), 0);
    /* It grows again from nothing. */
    assert_int_equal(hl_buf_append(&b, "abc", 3), 0);
    assert_memory_equal(hl_buf_head(&b), "abc", 3);
    hl_buf_consume(&b, 3);
    assert_non_null(b.data); /* small: kept */
    assert_int_equal(b.cap, 4096);
    hl_buf_free(&b);
}

static void test_map_insert_find_remove(void **state)
{
    (void)state;
    hl_map m = {0};
    char key[32];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(key, sizeof key, "k%d", i);
        assert_non_null(hl_map_insert(&m, key, (size_t)n, (void *)(intptr_t)i));
    }
    assert_int_equal(m.count, 5000);
    /* Binary keys with NUL bytes are distinct from their prefixes. */
    assert_non_null(hl_map_insert(&m, "a\0b", 3, (void *)1));
    assert_null(hl_map_find(&m, "a", 1));
    assert_non_null(hl_map_find(&m, "a\0b", 3));
    for (int i = 0; i < 5000; i += 2) {
        int n = snprintf(key, sizeof key, "k%d", i);
        hl_map_entry *e = hl_map_find(&m, key, (size_t)n);
        assert_non_null(e);
        assert_int_equal((intptr_t)e->value, i);
        hl_map_remove(&m, e);
    }
    size_t seen = 0, cur;
    for (hl_map_entry *e = hl_map_first(&m, &cur); e;
         e = hl_map_next(&m, e, &cur))
        seen++;
    assert_int_equal(seen, m.count);
    assert_int_equal(m.count, 2501);
    assert_null(hl_map_find(&m, "k0", 2));
    assert_non_null(hl_map_find(&m, "k1", 2));
    hl_map_clear(&m);
}

/* Feed bytes to a bounded reader; return what hl_reader_next says. */
static int read_one(hl_reply_limits *lim, const char *bytes, size_t len,
                    hilock_reply **out)
{
    redisReader *r = hl_reader_create(lim);
    assert_non_null(r);
    assert_int_equal(redisReaderFeed(r, bytes, len), REDIS_OK);
    int rc = hl_reader_next(r, lim, out);
    redisReaderFree(r);
    return rc;
}

static hl_reply_limits limits(uint64_t bytes, int64_t elements, int depth)
{
    hl_reply_limits l = {bytes, elements, depth, 0, 0, 0, 0};
    return l;
}

static void test_reader_builds_replies(void **state)
{
    (void)state;
    hl_reply_limits lim = limits(1024, 16, 4);
    hilock_reply *r;
    const char in[] = "*4\r\n$3\r\na\0b\r\n:-42\r\n$-1\r\n*1\r\n+OK\r\n";
    assert_int_equal(read_one(&lim, in, sizeof in - 1, &r), 1);
    assert_int_equal(r->type, HILOCK_REPLY_ARRAY);
    assert_int_equal(r->elements, 4);
    assert_int_equal(r->element[0]->type, HILOCK_REPLY_STRING);
    assert_int_equal(r->element[0]->len, 3);
    assert_memory_equal(r->element[0]->str, "a\0b", 3);
    assert_int_equal(r->element[1]->integer, -42);
    assert_int_equal(r->element[2]->type, HILOCK_REPLY_NIL);
    assert_int_equal(r->element[3]->element[0]->type, HILOCK_REPLY_STATUS);
    hilock_reply_free(r);

    lim = limits(1024, 16, 4);
    assert_int_equal(read_one(&lim, "-ERR x\r\n", 8, &r), 1);
    assert_int_equal(r->type, HILOCK_REPLY_ERROR);
    assert_true(hl_reply_is_error_prefix(r, "ERR"));
    assert_false(hl_reply_is_error_prefix(r, "NOSCRIPT"));
    hilock_reply_free(r);
}

static void test_reader_bounds(void **state)
{
    (void)state;
    hilock_reply *r;
    /* A bulk string longer than the byte bound, complete. */
    hl_reply_limits lim = limits(4, 16, 4);
    assert_int_equal(read_one(&lim, "$5\r\nhello\r\n", 11, &r), -2);
    assert_null(r);
    /* An announced huge bulk: rejected once the buffered tail passes the
     * bound, long before the bytes it announces could arrive. */
    lim = limits(64, 16, 4);
    char big[200];
    int n = snprintf(big, sizeof big, "$1000000000\r\n");
    memset(big + n, 'x', sizeof big - (size_t)n);
    assert_int_equal(read_one(&lim, big, sizeof big, &r), -2);
    /* Too many elements. */
    lim = limits(1024, 2, 4);
    assert_int_equal(read_one(&lim, "*3\r\n:1\r\n:2\r\n:3\r\n", 16, &r), -2);
    /* Too deep. */
    lim = limits(1024, 16, 2);
    assert_int_equal(read_one(&lim, "*1\r\n*1\r\n*1\r\n:1\r\n", 16, &r), -2);
    /* A protocol error is not a bound. */
    lim = limits(1024, 16, 4);
    assert_int_equal(read_one(&lim, "?what\r\n", 7, &r), -1);
    /* An incomplete reply within bounds asks for more. */
    lim = limits(1024, 16, 4);
    assert_int_equal(read_one(&lim, "*2\r\n:1\r\n", 8, &r), 0);
}

/* Feed bytes in pieces of step; what the last hl_reader_next said. */
static int read_pieces(hl_reply_limits *lim, redisReader *r,
                       const char *bytes, size_t len, size_t step,
                       hilock_reply **out)
{
    int rc = 0;
    for (size_t at = 0; at < len && rc == 0; at += step) {
        size_t n = len - at < step ? len - at : step;
        assert_int_equal(redisReaderFeed(r, bytes + at, n), REDIS_OK);
        rc = hl_reader_next(r, lim, out);
    }
    return rc;
}

/* Lines (status, error, integer, and the headers of strings and arrays)
 * are bounded on their own, finished or not, and a line split anywhere,
 * even between its CR and LF, still reads. */
static void test_reader_line_bound(void **state)
{
    (void)state;
    static char big[HL_MAX_LINE_BYTES + 64];
    hilock_reply *out;
    static const char types[] = "+-:$*";
    for (const char *t = types; *t; t++) {
        hl_reply_limits lim = limits(64u << 20, 16, 4);
        redisReader *r = hl_reader_create(&lim);
        big[0] = *t;
        memset(big + 1, '7', sizeof big - 1);
        assert_int_equal(read_pieces(&lim, r, big, sizeof big, 1000, &out),
                         -2);
        assert_null(out);
        redisReaderFree(r);
    }
    /* Finished in one piece, too long all the same. */
    hl_reply_limits lim = limits(64u << 20, 16, 4);
    redisReader *r = hl_reader_create(&lim);
    big[0] = '+';
    memset(big + 1, 'x', sizeof big - 1);
    memcpy(big + sizeof big - 2, "\r\n", 2);
    assert_int_equal(read_pieces(&lim, r, big, sizeof big, sizeof big, &out),
                     -2);
    redisReaderFree(r);
    /* Just within the bound, fed a byte at a time. */
    lim = limits(64u << 20, 16, 4);
    r = hl_reader_create(&lim);
    size_t len = 1 + HL_MAX_LINE_BYTES + 2;
    memcpy(big + 1 + HL_MAX_LINE_BYTES, "\r\n", 2);
    assert_int_equal(read_pieces(&lim, r, big, len, 1, &out), 1);
    assert_int_equal(out->type, HILOCK_REPLY_STATUS);
    assert_int_equal(out->len, HL_MAX_LINE_BYTES);
    hilock_reply_free(out);
    /* Replies split at every byte, across each other, and a string whose
     * body holds a CRLF, all read whole. */
    const char in[] = "*2\r\n$4\r\na\r\nb\r\n:12\r\n+OK\r\n$-1\r\n";
    static const int want[] = {HILOCK_REPLY_ARRAY, HILOCK_REPLY_STATUS,
                               HILOCK_REPLY_NIL};
    for (size_t step = 1; step <= 5; step++) {
        lim = limits(1024, 16, 4);
        redisReaderFree(r);
        r = hl_reader_create(&lim);
        int got = 0;
        for (size_t at = 0; at < sizeof in - 1; at += step) {
            size_t n = sizeof in - 1 - at < step ? sizeof in - 1 - at : step;
            assert_int_equal(redisReaderFeed(r, in + at, n), REDIS_OK);
            int rc;
            while ((rc = hl_reader_next(r, &lim, &out)) == 1) {
                assert_true(got < 3);
                assert_int_equal(out->type, want[got]);
                if (got == 0) {
                    assert_memory_equal(out->element[0]->str, "a\r\nb", 4);
                    assert_int_equal(out->element[1]->integer, 12);
                }
                hilock_reply_free(out);
                got++;
            }
            assert_int_equal(rc, 0);
        }
        assert_int_equal(got, 3);
    }
    redisReaderFree(r);
}

static void test_handle_registry(void **state)
{
    (void)state;
    int objects[300];
    for (int i = 0; i < 300; i++)
        assert_int_equal(hl_handle_add(&objects[i]), 0);
    for (int i = 0; i < 300; i += 3)
        assert_true(hl_handle_remove(&objects[i]));
    for (int i = 0; i < 300; i++)
        assert_int_equal(hl_handle_is_live(&objects[i]), i % 3 != 0);
    /* Removing twice is detected. */
    assert_false(hl_handle_remove(&objects[0]));
    for (int i = 0; i < 300; i++)
        if (i % 3 != 0)
            assert_true(hl_handle_remove(&objects[i]));
    assert_false(hl_handle_is_live(&objects[1]));
}

static hl_monotime fake_now;
static hl_monotime fake_clock(void) { return fake_now; }

static void test_clock_injection(void **state)
{
    (void)state;
    hl_monotime real = hl_monotime_now();
    assert_true(real > 0);
    fake_now = 123456;
    hl_monotime_set_clock(fake_clock);
    assert_int_equal(hl_monotime_now(), 123456);
    hl_monotime_set_clock(NULL);
    assert_true(hl_monotime_now() >= real);
}

/* The saturating helpers at the edges of int64_t: every result is the
 * exact one when it fits, the nearest end of the range when it does not. */
static void test_time_saturates(void **state)
{
    (void)state;
    assert_int_equal(hl_ms_to_us(0), 0);
    assert_int_equal(hl_ms_to_us(-1), -1000);
    assert_int_equal(hl_ms_to_us(INT64_MAX / 1000), INT64_MAX / 1000 * 1000);
    assert_int_equal(hl_ms_to_us(INT64_MAX / 1000 + 1), INT64_MAX);
    assert_int_equal(hl_ms_to_us(INT64_MAX), INT64_MAX);
    assert_int_equal(hl_ms_to_us(INT64_MIN / 1000), INT64_MIN / 1000 * 1000);
    assert_int_equal(hl_ms_to_us(INT64_MIN / 1000 - 1), INT64_MIN);
    assert_int_equal(hl_ms_to_us(INT64_MIN), INT64_MIN);
    assert_int_equal(HL_MS(INT64_MAX), INT64_MAX);

    assert_int_equal(hl_sat_add(INT64_MAX, 1), INT64_MAX);
    assert_int_equal(hl_sat_add(INT64_MAX, INT64_MAX), INT64_MAX);
    assert_int_equal(hl_sat_add(INT64_MIN, -1), INT64_MIN);
    assert_int_equal(hl_sat_add(INT64_MIN, INT64_MAX), -1);
    assert_int_equal(hl_sat_sub(INT64_MIN, 1), INT64_MIN);
    assert_int_equal(hl_sat_sub(INT64_MAX, -1), INT64_MAX);
    assert_int_equal(hl_sat_sub(0, INT64_MIN), INT64_MAX);
    assert_int_equal(hl_sat_sub(-1, INT64_MIN), INT64_MAX);
    assert_int_equal(hl_sat_sub(-2, INT64_MAX), INT64_MIN);
    assert_int_equal(hl_sat_mul(INT64_MAX, 2), INT64_MAX);
    assert_int_equal(hl_sat_mul(INT64_MIN, -1), INT64_MAX);
    assert_int_equal(hl_sat_mul(INT64_MIN, 2), INT64_MIN);
    assert_int_equal(hl_sat_mul(-3, 4), -12);

    assert_int_equal(hl_after_ms(1000, 2), 3000);
    assert_int_equal(hl_after_ms(1000, INT64_MAX), INT64_MAX);
    assert_int_equal(hl_after_ms(INT64_MAX - 5, 1), INT64_MAX);
    assert_int_equal(hl_after_ms(-5, INT64_MIN), INT64_MIN);
}

static bool parses(const char *s, int64_t *v)
{
    *v = 12345;
    return hl_i64_parse(s, strlen(s), v);
}

/* Integers exactly as Redis writes them, every 64-bit one, and nothing
 * else: no sign but '-', no leading zero, no "-0", no blank, nothing
 * beyond 64 bits. */
static void test_i64_parse(void **state)
{
    (void)state;
    int64_t v;
    assert_true(parses("0", &v) && v == 0);
    assert_true(parses("7", &v) && v == 7);
    assert_true(parses("-7", &v) && v == -7);
    assert_true(parses("9007199254740993", &v) &&
                v == INT64_C(9007199254740993));
    assert_true(parses("9223372036854775807", &v) && v == INT64_MAX);
    assert_true(parses("-9223372036854775808", &v) && v == INT64_MIN);
    static const char *const bad[] = {
        "", "-", "-0", "00", "07", "+7", " 7", "7 ", "5.5", "1e3", "0x10",
        "9223372036854775808", "-9223372036854775809",
        "18446744073709551616", "99999999999999999999", "abc",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (parses(bad[i], &v))
            fail_msg("\"%s\" read as %lld", bad[i], (long long)v);
        assert_true(v == 12345);
    }
    /* The length bounds it, not a NUL. */
    assert_true(hl_i64_parse("123", 2, &v) && v == 12);
    assert_false(hl_i64_parse("1\0", 2, &v));
}

/* Validity and drift for every lease a caller could pass, at any pair of
 * instants: never a wrap, so a huge lease is valid and a negative one is
 * not. */
static void test_validity_extremes(void **state)
{
    (void)state;
    assert_int_equal(hl_drift_margin(1000), HL_MS(12));
    assert_int_equal(hl_validity(1000, 0, HL_MS(100)),
                     HL_MS(1000 - 100 - 12));
    static const int64_t leases[] = {0, -1, 1, 2, 3, INT64_MIN, INT64_MAX,
                                     INT64_MAX / 1000, INT64_MAX / 1000 + 1,
                                     INT64_MIN / 1000 - 1};
    static const hl_monotime instants[] = {0, 1, -1, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof leases / sizeof leases[0]; i++) {
        assert_true(hl_drift_margin(leases[i]) >= HL_MS(2) ||
                    leases[i] < 0);
        for (size_t a = 0; a < 5; a++) {
            for (size_t b = 0; b < 5; b++) {
                hl_monotime v = hl_validity(leases[i], instants[a],
                                            instants[b]);
                if (leases[i] <= 0)
                    assert_true(v < 0 || instants[b] < instants[a]);
                if (leases[i] > 3 && instants[a] == instants[b])
                    assert_true(v > 0);
            }
        }
    }
    /* A lease at its largest is valid for about 99 % of it. */
    hl_monotime v = hl_validity(INT64_MAX, 0, HL_MS(10));
    assert_true(v > INT64_MAX / 100 * 98);
}

static void test_wait_and_blocking_limits(void **state)
{
    (void)state;
    fake_now = HL_MS(1000);
    hl_monotime_set_clock(fake_clock);
    assert_int_equal(hl_wait_deadline(0), 0);
    assert_int_equal(hl_wait_deadline(-1), INT64_MAX);
    assert_int_equal(hl_wait_deadline(INT64_MIN), INT64_MAX);
    assert_int_equal(hl_wait_deadline(INT64_MAX), INT64_MAX);
    assert_int_equal(hl_wait_deadline(INT64_MAX / 1000), INT64_MAX);
    assert_int_equal(hl_wait_deadline(5), HL_MS(1005));
    fake_now = INT64_MAX - 10;
    assert_int_equal(hl_wait_deadline(1), INT64_MAX);
    hl_monotime_set_clock(NULL);

    hilock_options o;
    memset(&o, 0, sizeof o);
    o.command_timeout_ms = 3000;
    o.connect_timeout_ms = 2000;
    /* Twice the command timeout, the connect timeout and a second. */
    assert_int_equal(hl_blocking_limit_us(&o, 0), HL_MS(9000));
    assert_int_equal(hl_blocking_limit_us(&o, 1000), HL_MS(10000));
    static const int64_t waits[] = {-1, INT64_MIN, INT64_MAX,
                                    INT64_MAX / 1000, INT64_MAX / 4000};
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++)
        assert_int_equal(hl_blocking_limit_us(&o, waits[i]), INT64_MAX / 4);
    /* Timeouts at the largest the setters take still fit. */
    o.command_timeout_ms = o.connect_timeout_ms = 86400000;
    assert_int_equal(hl_blocking_limit_us(&o, 0),
                     HL_MS(3 * 86400000LL + 1000));
    o.command_timeout_ms = o.connect_timeout_ms = INT64_MAX;
    assert_int_equal(hl_blocking_limit_us(&o, 0), INT64_MAX / 4);

    /* A deadline for pthread_cond_timedwait, however far or past. */
    struct timespec t = hl_monotonic_deadline(INT64_MAX);
    assert_true(t.tv_sec > 0 && t.tv_nsec >= 0 && t.tv_nsec < 1000000000L);
    t = hl_monotonic_deadline(INT64_MIN);
    assert_true(t.tv_nsec >= 0 && t.tv_nsec < 1000000000L);
    t = hl_monotonic_deadline(-1);
    assert_true(t.tv_nsec >= 0 && t.tv_nsec < 1000000000L);
}

/* The cluster specification's own examples and the CRC's check value. */
static void test_keyslot_rules(void **state)
{
    (void)state;
    assert_int_equal(hl_crc16("123456789", 9), 0x31C3);
    assert_int_equal(hl_keyslot("foo", 3), 12182);
    assert_int_equal(hl_keyslot("bar", 3), 5061);
    assert_int_equal(hl_keyslot("{user1000}.following", 20),
                     hl_keyslot("{user1000}.followers", 20));
    assert_int_equal(hl_keyslot("{user1000}.following", 20),
                     hl_keyslot("user1000", 8));
    /* The first '{' and the first '}' after it; an empty tag hashes the
     * whole key. */
    assert_int_equal(hl_keyslot("foo{}{bar}", 10),
                     hl_crc16("foo{}{bar}", 10) % 16384);
    assert_int_equal(hl_keyslot("foo{{bar}}zap", 13), hl_keyslot("{bar", 4));
    assert_int_equal(hl_keyslot("foo{{bar}}zap", 13),
                     hl_crc16("{bar", 4) % 16384);
    assert_int_equal(hl_keyslot("foo{bar}{zap}", 13), hl_keyslot("bar", 3));
    assert_int_equal(hl_keyslot("{", 1), hl_crc16("{", 1) % 16384);
    assert_int_equal(hl_keyslot("no}tag{", 7), hl_crc16("no}tag{", 7) % 16384);
    assert_int_equal(hl_keyslot("", 0), 0);
}

static int slot_of(int argc, const char *const *argv)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return hl_command_slot(argc, argv, lens);
}

/* Where a command goes on a cluster: its first key's slot, or nowhere in
 * particular.  A WAIT or an INFO must never be sent to the slot of its
 * first argument: each answers for the node it is asked of. */
static void test_command_slot(void **state)
{
    (void)state;
    int foo = (int)hl_keyslot("foo", 3);
    assert_int_equal(slot_of(2, (const char *[]){"GET", "foo"}), foo);
    assert_int_equal(slot_of(2, (const char *[]){"get", "foo"}), foo);
    assert_int_equal(slot_of(4, (const char *[]){"EVALSHA", "abc", "1", "foo"}),
                     foo);
    assert_int_equal(slot_of(3, (const char *[]){"EVAL", "return 1", "0"}),
                     -1);
    assert_int_equal(slot_of(1, (const char *[]){"PING"}), -1);
    assert_int_equal(slot_of(3, (const char *[]){"WAIT", "2", "500"}), -1);
    assert_int_equal(slot_of(3, (const char *[]){"wait", "1", "0"}), -1);
    assert_int_equal(slot_of(2, (const char *[]){"INFO", "replication"}), -1);
    assert_int_equal(slot_of(2, (const char *[]){"CLUSTER", "SHARDS"}), -1);
    assert_int_equal(slot_of(3, (const char *[]){"WAITAOF", "1", "0"}), -1);
    /* SCAN walks the node it is asked of; its cursor is no key. */
    assert_int_equal(slot_of(4, (const char *[]){"SCAN", "0", "MATCH", "*"}),
                     -1);
    /* A name that only begins like one of them is a command with a key. */
    assert_int_equal(slot_of(2, (const char *[]){"WAITX", "foo"}), foo);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_doubles_and_caps),
        cmocka_unit_test(test_buf_append_consume),
        cmocka_unit_test(test_buf_drained_burst_lets_go),
        cmocka_unit_test(test_map_insert_find_remove),
        cmocka_unit_test(test_reader_builds_replies),
        cmocka_unit_test(test_reader_bounds),
        cmocka_unit_test(test_reader_line_bound),
        cmocka_unit_test(test_handle_registry),
        cmocka_unit_test(test_clock_injection),
        cmocka_unit_test(test_time_saturates),
        cmocka_unit_test(test_i64_parse),
        cmocka_unit_test(test_validity_extremes),
        cmocka_unit_test(test_wait_and_blocking_limits),
        cmocka_unit_test(test_keyslot_rules),
        cmocka_unit_test(test_command_slot),
        cmocka_unit_test(test_turns_follow_the_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
