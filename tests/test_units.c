/* Pure logic of the core, without a server: backoff, the byte buffer, the
 * hash map, the bounded reply reader, the live-handle registry, the clock. */
/* ctest-timeout: 60 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/conn.h"
#include "core/handle.h"
#include "core/map.h"
#include "core/monotime.h"
#include "core/reply.h"

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
    hl_reply_limits l = {bytes, elements, depth, 0, 0};
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_doubles_and_caps),
        cmocka_unit_test(test_buf_append_consume),
        cmocka_unit_test(test_map_insert_find_remove),
        cmocka_unit_test(test_reader_builds_replies),
        cmocka_unit_test(test_reader_bounds),
        cmocka_unit_test(test_handle_registry),
        cmocka_unit_test(test_clock_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
