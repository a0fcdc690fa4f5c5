/* hilock_stats: the counts, gauges and histograms of a client's acquires
 * and holds against a real redis-server, a caller built against a
 * shorter struct, and the Prometheus text of them. */
/* ctest-timeout: 120 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

static hl_lock_fixture fx;

static hilock_stats read_stats(hilock_client *c)
{
    hilock_stats s;
    memset(&s, 0xab, sizeof s);
    s.size = sizeof s;
    assert_status(hilock_client_stats_read(c, &s), HILOCK_OK);
    assert_int_equal(s.size, sizeof s);
    return s;
}

static uint64_t total(const uint64_t *buckets)
{
    uint64_t n = 0;
    for (int i = 0; i < HILOCK_STATS_BUCKETS; i++)
        n += buckets[i];
    return n;
}

/* The bucket of bound_us: the first whose upper bound is at least it. */
static int bucket_of(int64_t us)
{
    static const int64_t bounds[HILOCK_STATS_BUCKETS] =
        HILOCK_STATS_BUCKET_BOUNDS_US;
    int i = 0;
    while (i < HILOCK_STATS_BUCKETS - 1 && us > bounds[i])
        i++;
    return i;
}

static void test_acquires_and_holds_are_counted(void **state)
{
    (void)state;
    hilock_client *a = hl_new_client(fx.server, NULL);
    hilock_client *b = hl_new_client(fx.server, NULL);
    hilock_lock *la, *lb;
    assert_status(hilock_lock_create(&la, a, "st"), HILOCK_OK);
    assert_status(hilock_lock_create(&lb, b, "st"), HILOCK_OK);
    hilock_stats s0 = read_stats(b);
    assert_int_equal(s0.acquires, 0);
    assert_int_equal(total(s0.wait_us), 0);

    /* a holds; b gives up once, then waits until a lets go. */
    int64_t held_from = hl_now_ms();
    assert_status(hilock_lock_acquire(la), HILOCK_OK);
    assert_status(hilock_lock_try_acquire(lb, 0, 30000), HILOCK_EBUSY);
    hl_acquirer w;
    hl_acquirer_start(&w, lb, hl_widen(10000), 30000, true);
    /* b's acquire found the lock held, and waits. */
    int64_t until = hl_now_ms() + hl_widen(10000);
    while (read_stats(b).acquires_waiting != 1)
        assert_true(hl_now_ms() < until), hl_sleep_ms(2);
    hilock_stats mid = read_stats(b);
    assert_true(mid.ops_pending >= 1);
    hl_sleep_ms(60); /* a's hold, and b's wait, last at least this */
    assert_status(hilock_lock_release(la), HILOCK_OK);
    int64_t held_ms = hl_now_ms() - held_from;
    hl_acquirer_join(&w, hl_widen(10000));
    assert_status(w.rc, HILOCK_OK);
    assert_status(w.release_rc, HILOCK_OK);

    hilock_stats sb = read_stats(b);
    assert_int_equal(sb.acquires, 1);
    assert_int_equal(sb.acquires_busy, 1);
    assert_int_equal(sb.acquires_failed, 0);
    assert_int_equal(sb.acquires_waiting, 0);
    assert_int_equal(total(sb.wait_us), 1);
    /* The wait lasted 60 ms at least: in the bucket up to 100 ms or a
     * later one, never an earlier. */
    for (int i = 0; i < bucket_of(60000); i++)
        assert_int_equal(sb.wait_us[i], 0);
    assert_true(sb.wait_sum_us >= 60000);

    hilock_stats sa = read_stats(a);
    assert_int_equal(sa.acquires, 1);
    assert_int_equal(sa.releases, 1);
    assert_int_equal(total(sa.hold_us), 1);
    assert_true(sa.hold_sum_us >= 60000);
    assert_true(sa.hold_sum_us <= (uint64_t)(held_ms + hl_widen(1000)) * 1000);
    assert_int_equal(sa.counters.leases_active, 0);

    /* A caller that knows only the counters gets them, and nothing past
     * its size is touched. */
    struct {
        size_t size;
        hilock_client_stats counters;
        uint64_t guard;
    } old;
    old.size = offsetof(hilock_stats, counters) + sizeof old.counters;
    old.guard = 0x5a5a5a5a5a5a5a5aULL;
    assert_status(hilock_client_stats_read(a, (hilock_stats *)(void *)&old),
                  HILOCK_OK);
    assert_int_equal(old.guard, 0x5a5a5a5a5a5a5a5aULL);
    assert_true(old.counters.connects >= 1);
    hilock_stats tiny = {.size = 4};
    assert_status(hilock_client_stats_read(a, &tiny), HILOCK_EINVAL);

    hilock_lock_destroy(lb);
    hilock_lock_destroy(la);
    hl_free_client(b);
    hl_free_client(a);
}

static void test_prometheus_text(void **state)
{
    (void)state;
    hilock_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.acquires = 3;
    s.wait_us[0] = 2;
    s.wait_us[3] = 1;
    s.wait_sum_us = 50150;
    s.counters.leases_active = 7;
    static char buf[16384];
    size_t n = 0;
    assert_status(hilock_stats_format_prometheus(&s, "w1", buf, sizeof buf,
                                                 &n),
                  HILOCK_OK);
    assert_int_equal(n, strlen(buf));
    assert_non_null(strstr(buf, "# TYPE hilock_leases_active gauge\n"
                                "hilock_leases_active{client=\"w1\"} 7\n"));
    assert_non_null(strstr(buf, "hilock_acquires_total{client=\"w1\"} 3\n"));
    /* Cumulative buckets, the last one +Inf, the sum in seconds. */
    assert_non_null(strstr(buf, "hilock_acquire_wait_seconds_bucket{client="
                                "\"w1\",le=\"0.0001\"} 2\n"));
    assert_non_null(strstr(buf, "hilock_acquire_wait_seconds_bucket{client="
                                "\"w1\",le=\"0.01\"} 2\n"));
    assert_non_null(strstr(buf, "hilock_acquire_wait_seconds_bucket{client="
                                "\"w1\",le=\"0.1\"} 3\n"));
    assert_non_null(strstr(buf, "hilock_acquire_wait_seconds_bucket{client="
                                "\"w1\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(buf, "hilock_acquire_wait_seconds_sum{client="
                                "\"w1\"} 0.050150\n"));
    assert_non_null(strstr(buf, "hilock_acquire_wait_seconds_count{client="
                                "\"w1\"} 3\n"));
    /* Without a label, no braces but the buckets'. */
    assert_status(hilock_stats_format_prometheus(&s, NULL, buf, sizeof buf,
                                                 NULL),
                  HILOCK_OK);
    assert_non_null(strstr(buf, "hilock_acquires_total 3\n"));
    assert_non_null(strstr(buf, "hilock_hold_seconds_bucket{le=\"+Inf\"} 0\n"));
    /* Too small a buffer says how much is needed; a bad label is
     * refused. */
    char small[64];
    assert_status(hilock_stats_format_prometheus(&s, "w1", small,
                                                 sizeof small, &n),
                  HILOCK_EINVAL);
    assert_string_equal(small, "");
    assert_true(n > sizeof small);
    assert_status(hilock_stats_format_prometheus(&s, "a\"b", buf, sizeof buf,
                                                 NULL),
                  HILOCK_EINVAL);
    static char exact[16384];
    assert_status(hilock_stats_format_prometheus(&s, "w1", exact, n, NULL),
                  HILOCK_OK);
}

/* Several clients in one text: each family described once, with every
 * client's series in it. */
static void test_prometheus_text_of_many(void **state)
{
    (void)state;
    hilock_stats a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.size = b.size = sizeof a;
    a.acquires = 3;
    b.acquires = 5;
    b.hold_us[1] = 4;
    const hilock_stats *both[] = {&a, &b};
    const char *labels[] = {"a", "b"};
    static char buf[32768];
    assert_status(hilock_stats_format_prometheus_many(both, labels, 2, buf,
                                                      sizeof buf, NULL),
                  HILOCK_OK);
    assert_non_null(strstr(buf, "# TYPE hilock_acquires_total counter\n"
                                "hilock_acquires_total{client=\"a\"} 3\n"
                                "hilock_acquires_total{client=\"b\"} 5\n"));
    assert_non_null(strstr(buf, "hilock_hold_seconds_count{client=\"b\"} "
                                "4\n"));
    /* Every family once. */
    const char *first = strstr(buf, "# TYPE hilock_hold_seconds histogram");
    assert_non_null(first);
    assert_null(strstr(first + 1, "# TYPE hilock_hold_seconds histogram"));
    /* None: the families alone; a NULL entry is refused. */
    assert_status(hilock_stats_format_prometheus_many(NULL, NULL, 0, buf,
                                                      sizeof buf, NULL),
                  HILOCK_OK);
    assert_non_null(strstr(buf, "# TYPE hilock_acquires_total counter\n"
                                "# HELP"));
    const hilock_stats *hole[] = {&a, NULL};
    assert_status(hilock_stats_format_prometheus_many(hole, labels, 2, buf,
                                                      sizeof buf, NULL),
                  HILOCK_EINVAL);
}

/* A client's card carries its stats, as another client reads them. */
static void test_card_carries_stats(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(fx.server, NULL);
    hilock_client *reader = hl_new_client(fx.server, NULL);
    hilock_lock *l;
    assert_status(hilock_lock_create(&l, c, "card-stats"), HILOCK_OK);
    for (int i = 0; i < 3; i++) {
        assert_status(hilock_lock_acquire(l), HILOCK_OK);
        assert_status(hilock_lock_release(l), HILOCK_OK);
    }
    /* The card's next round, within 5 s, has them. */
    hilock_client_card *card = NULL;
    int64_t until = hl_now_ms() + hl_widen(15000);
    for (;;) {
        assert_status(hilock_client_card_get(reader, hilock_client_id(c),
                                             &card),
                      HILOCK_OK);
        if (card->stats != NULL && card->stats->acquires == 3)
            break;
        hilock_client_card_free(card);
        card = NULL;
        if (hl_now_ms() >= until)
            fail_msg("the card never showed the 3 acquires");
        hl_sleep_ms(50);
    }
    assert_int_equal(card->stats->releases, 3);
    assert_int_equal(card->stats->size, sizeof(hilock_stats));
    uint64_t granted = 0;
    for (int i = 0; i < HILOCK_STATS_BUCKETS; i++)
        granted += card->stats->wait_us[i];
    assert_int_equal(granted, 3);
    hilock_client_card_free(card);
    hilock_lock_destroy(l);
    hl_free_client(reader);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_acquires_and_holds_are_counted, &fx),
        cmocka_unit_test(test_prometheus_text),
        cmocka_unit_test(test_prometheus_text_of_many),
        hl_lock_test(test_card_carries_stats, &fx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
