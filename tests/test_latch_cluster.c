/* Count-down latches on a real Redis Cluster (3 masters, 3 replicas).
 * Redisson names a latch's channel "redisson_countdownlatch__channel__
 * {NAME}": its hash tag is NAME, so for a name without '}' the channel
 * shares the latch's slot, the scripts may SPUBLISH it, and waiters
 * SSUBSCRIBE on the latch's master.  A name with '}' would put the
 * channel in another slot; such names are refused there. */
/* ctest-timeout: 180 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/transport/keyslot.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_redis_cluster *cluster;

static int setup(void **state)
{
    (void)state;
    cluster = hl_fixture_cluster();
    return cluster ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_cluster_stop(cluster);
    return 0;
}

static hilock_client *client(void)
{
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, hl_redis_cluster_url(cluster)),
                  HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    hilock_client *c = NULL;
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

typedef struct rec {
    atomic_int done;
    atomic_int opened;
    atomic_llong last_ms;
} rec;

static void record(hilock_latch *l, int status, int64_t value, void *data)
{
    (void)l;
    rec *r = data;
    if (status == HILOCK_OK && value == 1)
        atomic_fetch_add(&r->opened, 1);
    atomic_store(&r->last_ms, (long long)hl_now_ms());
    atomic_fetch_add(&r->done, 1);
}

static int message_bound_ms(void)
{
    return hl_under_valgrind() ? 5000 : 400;
}

static unsigned slot_of(const char *s)
{
    return hl_keyslot(s, strlen(s));
}

/* Waiters of two clients on latches whose slots lie on every master are
 * woken by the sharded message of the count down that reaches zero. */
static void test_fan_in_on_every_master(void **state)
{
    (void)state;
    hilock_client *a = client(), *b = client();
    /* Names whose slots cover the three masters. */
    const char *names[3] = {NULL, NULL, NULL};
    static char buf[64][32];
    hl_redis_server *seen[3] = {NULL, NULL, NULL};
    int found = 0;
    for (int i = 0; i < 64 && found < 3; i++) {
        snprintf(buf[i], sizeof buf[i], "lc:%d", i);
        hl_redis_server *m = hl_redis_cluster_master_of(cluster,
                                                        (int)slot_of(buf[i]));
        bool dup = false;
        for (int j = 0; j < found; j++)
            dup = dup || seen[j] == m;
        if (!dup) {
            seen[found] = m;
            names[found++] = buf[i];
        }
    }
    assert_int_equal(found, 3);
    for (int i = 0; i < 3; i++) {
        char ch[96];
        snprintf(ch, sizeof ch, "redisson_countdownlatch__channel__{%s}",
                 names[i]);
        assert_int_equal(slot_of(ch), slot_of(names[i]));
        hilock_latch *la, *lb;
        assert_status(hilock_latch_create(&la, a, names[i]),
                      HILOCK_OK);
        assert_status(hilock_latch_create(&lb, b, names[i]),
                      HILOCK_OK);
        bool set = false;
        assert_status(hilock_latch_try_set_count(la, 2, &set), HILOCK_OK);
        assert_true(set);
        rec r;
        memset(&r, 0, sizeof r);
        assert_status(hilock_latch_await_async(la, HILOCK_WAIT_FOREVER,
                                               record, &r, NULL),
                      HILOCK_OK);
        assert_status(hilock_latch_await_async(lb, HILOCK_WAIT_FOREVER,
                                               record, &r, NULL),
                      HILOCK_OK);
        /* Both clients listen on the latch's own master. */
        int64_t until = hl_now_ms() + hl_widen(10000);
        while (hl_fixture_shardnumsub(seen[i], ch) < 2 &&
               hl_now_ms() < until)
            hl_sleep_ms(10);
        assert_int_equal(hl_fixture_shardnumsub(seen[i], ch), 2);
        int64_t left = -1;
        assert_status(hilock_latch_count_down(lb, &left), HILOCK_OK);
        assert_int_equal(left, 1);
        assert_status(hilock_latch_count_down(la, &left), HILOCK_OK);
        assert_int_equal(left, 0);
        long long zero_at = hl_now_ms();
        hl_expect_count(&r.done, 2, message_bound_ms());
        assert_int_equal(atomic_load(&r.opened), 2);
        assert_true(atomic_load(&r.last_ms) - zero_at < message_bound_ms());
        int64_t n = -1;
        assert_status(hilock_latch_count(lb, &n), HILOCK_OK);
        assert_int_equal(n, 0);
        assert_status(hilock_latch_destroy(la), HILOCK_OK);
        assert_status(hilock_latch_destroy(lb), HILOCK_OK);
    }
    hilock_client_destroy(a);
    hilock_client_destroy(b);
}

/* A peer doing Redisson's count down on a cluster (its script publishes
 * with SPUBLISH) wakes our waiter by the message. */
static void test_redisson_peer_spublish(void **state)
{
    (void)state;
    const char *name = "lc:peer";
    char ch[96], out[64];
    snprintf(ch, sizeof ch, "redisson_countdownlatch__channel__{%s}", name);
    hilock_client *c = client();
    hilock_latch *l;
    assert_status(hilock_latch_create(&l, c, name), HILOCK_OK);
    assert_status(hilock_latch_try_set_count(l, 1, NULL), HILOCK_OK);
    rec r;
    memset(&r, 0, sizeof r);
    assert_status(hilock_latch_await_async(l, HILOCK_WAIT_FOREVER, record,
                                           &r, NULL),
                  HILOCK_OK);
    hl_redis_server *m = hl_redis_cluster_master_of(cluster,
                                                    (int)slot_of(name));
    int64_t until = hl_now_ms() + hl_widen(10000);
    while (hl_fixture_shardnumsub(m, ch) < 1 && hl_now_ms() < until)
        hl_sleep_ms(10);
    static const char peer_down[] =
        "local v = redis.call('decr', KEYS[1]); "
        "if v <= 0 then redis.call('del', KEYS[1]) end; "
        "if v == 0 then redis.call('spublish', KEYS[2], ARGV[1]) end";
    assert_int_not_equal(hl_raw_cmd(m, out, sizeof out, "EVAL", peer_down,
                                    "2", name, ch, "0", (char *)NULL),
                         '-');
    long long zero_at = hl_now_ms();
    hl_expect_count(&r.done, 1, message_bound_ms());
    assert_int_equal(atomic_load(&r.opened), 1);
    assert_true(atomic_load(&r.last_ms) - zero_at < message_bound_ms());
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
    hilock_client_destroy(c);
}

/* Names whose channel would leave the latch's slot are refused before
 * anything is written; a name with '{' alone is fine. */
static void test_names_with_braces(void **state)
{
    (void)state;
    hilock_client *c = client();
    hilock_latch *bad, *good;
    assert_status(hilock_latch_create(&bad, c, "lc:{t}x"), HILOCK_OK);
    assert_status(hilock_latch_try_set_count(bad, 2, NULL), HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "'}'"));
    assert_status(hilock_latch_count_down(bad, NULL), HILOCK_EINVAL);
    assert_status(hilock_latch_delete(bad, NULL), HILOCK_EINVAL);
    bool opened = false;
    assert_status(hilock_latch_await(bad, 100, &opened), HILOCK_EINVAL);
    int64_t n = -1;
    assert_status(hilock_latch_count(bad, &n), HILOCK_OK);
    assert_int_equal(n, 0);

    assert_status(hilock_latch_create(&good, c, "lc:{open"), HILOCK_OK);
    bool set = false;
    assert_status(hilock_latch_try_set_count(good, 1, &set), HILOCK_OK);
    assert_true(set);
    assert_status(hilock_latch_count_down(good, NULL), HILOCK_OK);
    assert_status(hilock_latch_await(good, 100, &opened), HILOCK_OK);
    assert_true(opened);
    assert_status(hilock_latch_destroy(bad), HILOCK_OK);
    assert_status(hilock_latch_destroy(good), HILOCK_OK);
    hilock_client_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fan_in_on_every_master),
        cmocka_unit_test(test_redisson_peer_spublish),
        cmocka_unit_test(test_names_with_braces),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
