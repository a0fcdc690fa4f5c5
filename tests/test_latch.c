/* Count-down latches against one real redis-server: every call and its
 * errors, waiters woken at zero by the message, a waiter's timeout, a
 * wake-up that never comes (a count down by a user whose ACL has no
 * PUBLISH) bounded by the re-check, delete, the end of waits when the
 * handle or client goes, and interplay with a peer that does what
 * Redisson's RCountDownLatch does (plain commands and scripts of the
 * test's own, and a plain subscriber standing for a Java waiter). */
/* ctest-timeout: 120 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/plain_sub.h"
#include "support/raw_reads.h"

#define PASSWORD "latch-test-pw"

static hl_redis_server *server;
static hilock_client *client;

static int setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    client = hl_new_client(server, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hl_free_client(client);
    hl_redis_server_stop(server);
    return 0;
}

static hilock_latch *new_latch(hilock_client *c, const char *name)
{
    hilock_latch *l = NULL;
    assert_status(hilock_latch_create(&l, c, name), HILOCK_OK);
    return l;
}

static void channel_of(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "redisson_countdownlatch__channel__{%s}", name);
}

/* Outcomes of async latch calls. */
typedef struct rec {
    atomic_int done;
    atomic_int opened;
    atomic_int status; /* of the last */
    atomic_llong last_ms; /* when the last came */
    atomic_llong value;   /* of the last */
} rec;

static void record(hilock_latch *l, int status, int64_t value, void *data)
{
    (void)l;
    rec *r = data;
    atomic_store(&r->status, status);
    if (status == HILOCK_OK && value == 1)
        atomic_fetch_add(&r->opened, 1);
    atomic_store(&r->last_ms, (long long)hl_now_ms());
    atomic_store(&r->value, (long long)value);
    atomic_fetch_add(&r->done, 1);
}

/* A latch wait that a message ends is over within this bound; awaits read
 * nothing on a timer of their own, so meeting it shows the message woke
 * it. */
static int message_bound_ms(void)
{
    return hl_under_valgrind() ? 5000 : 400;
}

/* ---- calls -------------------------------------------------------------- */

static void test_set_down_count(void **state)
{
    (void)state;
    hilock_latch *l = new_latch(client, "latch:calls");
    bool set = false;
    int64_t n = -1;

    assert_status(hilock_latch_try_set_count(l, 3, &set), HILOCK_OK);
    assert_true(set);
    /* A second try leaves the count alone. */
    assert_status(hilock_latch_try_set_count(l, 7, &set), HILOCK_OK);
    assert_false(set);
    assert_status(hilock_latch_count(l, &n), HILOCK_OK);
    assert_int_equal(n, 3);
    char raw[32];
    assert_true(hl_raw_bulk(server, raw, sizeof raw, "GET", "latch:calls",
                            (char *)NULL));
    assert_string_equal(raw, "3");

    assert_status(hilock_latch_count_down(l, &n), HILOCK_OK);
    assert_int_equal(n, 2);
    assert_status(hilock_latch_count_down(l, &n), HILOCK_OK);
    assert_int_equal(n, 1);
    assert_status(hilock_latch_count_down(l, &n), HILOCK_OK);
    assert_int_equal(n, 0);
    assert_int_equal(hl_raw_exists(server, "latch:calls"), 0);
    /* Below zero: nothing happens, nothing is left behind. */
    assert_status(hilock_latch_count_down(l, &n), HILOCK_OK);
    assert_int_equal(n, 0);
    assert_int_equal(hl_raw_exists(server, "latch:calls"), 0);
    assert_status(hilock_latch_count(l, &n), HILOCK_OK);
    assert_int_equal(n, 0);

    /* An open latch may be set again; delete says whether it removed
     * anything. */
    bool deleted = false;
    assert_status(hilock_latch_try_set_count(l, HILOCK_LATCH_MAX_COUNT, &set),
                  HILOCK_OK);
    assert_true(set);
    assert_status(hilock_latch_count(l, &n), HILOCK_OK);
    assert_int_equal(n, HILOCK_LATCH_MAX_COUNT);
    assert_status(hilock_latch_count_down(l, &n), HILOCK_OK);
    assert_int_equal(n, HILOCK_LATCH_MAX_COUNT - 1);
    assert_status(hilock_latch_delete(l, &deleted), HILOCK_OK);
    assert_true(deleted);
    assert_status(hilock_latch_delete(l, &deleted), HILOCK_OK);
    assert_false(deleted);

    size_t len = 0;
    assert_string_equal(hilock_latch_name(l, &len), "latch:calls");
    assert_int_equal(len, strlen("latch:calls"));
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
}

static void test_async_calls(void **state)
{
    (void)state;
    hilock_latch *l = new_latch(client, "latch:async");
    rec r;
    memset(&r, 0, sizeof r);
    assert_status(hilock_latch_try_set_count_async(l, 2, record, &r),
                  HILOCK_OK);
    hl_expect_count(&r.done, 1, 5000);
    assert_int_equal(atomic_load(&r.value), 1); /* set */
    assert_status(hilock_latch_try_set_count_async(l, 2, record, &r),
                  HILOCK_OK);
    hl_expect_count(&r.done, 2, 5000);
    assert_int_equal(atomic_load(&r.value), 0); /* not set again */
    assert_status(hilock_latch_count_down_async(l, record, &r), HILOCK_OK);
    hl_expect_count(&r.done, 3, 5000);
    assert_int_equal(atomic_load(&r.value), 1); /* left */
    assert_status(hilock_latch_count_async(l, record, &r), HILOCK_OK);
    hl_expect_count(&r.done, 4, 5000);
    assert_int_equal(atomic_load(&r.value), 1); /* the count */
    assert_status(hilock_latch_await_async(l, 0, record, &r, NULL), HILOCK_OK);
    hl_expect_count(&r.done, 5, 5000);
    assert_int_equal(atomic_load(&r.value), 0); /* not open */
    assert_status(hilock_latch_delete_async(l, record, &r), HILOCK_OK);
    hl_expect_count(&r.done, 6, 5000);
    assert_int_equal(atomic_load(&r.value), 1); /* deleted */
    assert_status(hilock_latch_await_async(l, 0, record, &r, NULL), HILOCK_OK);
    hl_expect_count(&r.done, 7, 5000);
    assert_int_equal(atomic_load(&r.value), 1); /* open */
    assert_status(atomic_load(&r.status), HILOCK_OK);
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
    assert_status(hilock_latch_destroy(l), HILOCK_ECLOSED);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    hilock_latch *l = new_latch(client, "latch:bad");
    rec r;
    memset(&r, 0, sizeof r);
    bool set = true;
    const int64_t bad[] = {0, -1, INT64_MIN, HILOCK_LATCH_MAX_COUNT + 1,
                           INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_status(hilock_latch_try_set_count(l, bad[i], &set),
                      HILOCK_EINVAL);
        assert_false(set);
        const char *why = hilock_last_error();
        assert_true(strstr(why, bad[i] < 1 ? "counts from 1" : "too large") !=
                    NULL);
        assert_status(hilock_latch_try_set_count_async(l, bad[i], record, &r),
                      HILOCK_EINVAL);
    }
    assert_int_equal(hl_raw_exists(server, "latch:bad"), 0);

    bool opened = true;
    assert_status(hilock_latch_await(l, -2, &opened), HILOCK_EINVAL);
    assert_false(opened);
    assert_status(hilock_latch_await(l, INT64_MIN, &opened), HILOCK_EINVAL);
    assert_status(hilock_latch_await_async(l, -5, record, &r, NULL), HILOCK_EINVAL);
    assert_status(hilock_latch_count(l, NULL), HILOCK_EINVAL);
    assert_status(hilock_latch_count(NULL, NULL), HILOCK_EINVAL);
    assert_status(hilock_latch_count_down(NULL, NULL), HILOCK_EINVAL);
    assert_status(hilock_latch_count_async(l, NULL, NULL), HILOCK_EINVAL);
    assert_int_equal(atomic_load(&r.done), 0);

    hilock_latch *none = NULL;
    assert_status(hilock_latch_create(&none, client, ""), HILOCK_EINVAL);
    assert_null(none);
    assert_status(hilock_latch_create(NULL, client, "x"), HILOCK_EINVAL);
    assert_status(hilock_latch_destroy(NULL), HILOCK_EINVAL);
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
}

static void test_wrong_values(void **state)
{
    (void)state;
    hilock_latch *h = new_latch(client, "latch:hash");
    hilock_latch *s = new_latch(client, "latch:text");
    int64_t n = 0;
    bool set = true;
    hl_raw_int(server, "HSET", "latch:hash", "f", "1", (char *)NULL);
    char ok[16];
    hl_raw_cmd(server, ok, sizeof ok, "SET", "latch:text", "abc",
               (char *)NULL);

    assert_status(hilock_latch_count(h, &n), HILOCK_EREDIS);
    assert_status(hilock_latch_count_down(h, &n), HILOCK_EREDIS);
    assert_status(hilock_latch_try_set_count(h, 2, &set), HILOCK_OK);
    assert_false(set); /* something is there: not a new count */
    assert_status(hilock_latch_count(s, &n), HILOCK_EPROTO);
    assert_true(strstr(hilock_last_error(), "\"abc\"") != NULL);
    assert_status(hilock_latch_count_down(s, &n), HILOCK_EPROTO);
    assert_true(strstr(hilock_last_error(), "\"abc\"") != NULL);
    bool opened = true;
    assert_status(hilock_latch_await(s, 100, &opened), HILOCK_EPROTO);
    assert_false(opened);

    assert_status(hilock_latch_destroy(h), HILOCK_OK);
    assert_status(hilock_latch_destroy(s), HILOCK_OK);
}

/* ---- waiting ------------------------------------------------------------ */

#define WAITERS 12

static void test_many_waiters_woken_at_zero(void **state)
{
    (void)state;
    const char *name = "latch:many";
    char ch[128];
    channel_of(name, ch, sizeof ch);
    hilock_client *other = hl_new_client(server, NULL);
    hilock_latch *mine = new_latch(client, name);
    hilock_latch *theirs = new_latch(other, name);
    hl_plain_sub *java = hl_plain_sub_open(server, ch);
    char msg[32];

    assert_status(hilock_latch_try_set_count(mine, 3, NULL), HILOCK_OK);
    assert_true(hl_plain_sub_next(java, msg, sizeof msg, 5000));
    assert_string_equal(msg, "1"); /* Redisson's new-count message */

    rec r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < WAITERS; i++)
        assert_status(hilock_latch_await_async(i % 2 ? theirs : mine,
                                               HILOCK_WAIT_FOREVER, record,
                                               &r, NULL),
                      HILOCK_OK);
    /* Both clients subscribed: their awaits listen. */
    hl_expect_numsub(server, ch, 3, 3);
    assert_status(hilock_latch_count_down(theirs, NULL), HILOCK_OK);
    assert_status(hilock_latch_count_down(mine, NULL), HILOCK_OK);
    assert_int_equal(atomic_load(&r.done), 0);
    int64_t left = -1;
    assert_status(hilock_latch_count_down(mine, &left), HILOCK_OK);
    assert_int_equal(left, 0);
    long long zero_at = hl_now_ms();
    hl_expect_count(&r.done, WAITERS, message_bound_ms());
    assert_int_equal(atomic_load(&r.opened), WAITERS);
    assert_true(atomic_load(&r.last_ms) - zero_at < message_bound_ms());
    assert_true(hl_plain_sub_next(java, msg, sizeof msg, 5000));
    assert_string_equal(msg, "0"); /* Redisson's zero message */

    hl_plain_sub_close(java);
    assert_status(hilock_latch_destroy(theirs), HILOCK_OK);
    assert_status(hilock_latch_destroy(mine), HILOCK_OK);
    hl_free_client(other);
}

static void test_await_timeout(void **state)
{
    (void)state;
    hilock_latch *l = new_latch(client, "latch:timeout");
    bool opened = true;
    assert_status(hilock_latch_try_set_count(l, 1, NULL), HILOCK_OK);

    int64_t t0 = hl_now_ms();
    assert_status(hilock_latch_await(l, 0, &opened), HILOCK_OK);
    assert_false(opened);
    t0 = hl_now_ms();
    assert_status(hilock_latch_await(l, 300, &opened), HILOCK_OK);
    int64_t took = hl_now_ms() - t0;
    assert_false(opened);
    assert_true(took >= 300);
    assert_true(took < hl_widen(1500));

    /* A wait longer than the re-check interval still ends on time. */
    t0 = hl_now_ms();
    assert_status(hilock_latch_await(l, 1300, &opened), HILOCK_OK);
    took = hl_now_ms() - t0;
    assert_false(opened);
    assert_true(took >= 1300);
    assert_true(took < hl_widen(2500));

    assert_status(hilock_latch_count_down(l, NULL), HILOCK_OK);
    assert_status(hilock_latch_await(l, 0, &opened), HILOCK_OK);
    assert_true(opened);
    assert_status(hilock_latch_await(l, HILOCK_WAIT_FOREVER, &opened),
                  HILOCK_OK);
    assert_true(opened);
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
}

/* A count down by a user the server's ACL allows no PUBLISH: the count
 * reaches zero and the call succeeds, but no message goes out.  Awaits do
 * not poll, so ours sees the latch open when it reads the count once more
 * at the end of its wait. */
static void test_missed_message_seen_at_the_end(void **state)
{
    (void)state;
    const char *name = "latch:silent";
    char ch[128], url[160], msg[32];
    channel_of(name, ch, sizeof ch);
    hl_fixture_acl_user_rules(server, "nopub", PASSWORD,
                              "~* &* +@all -publish");
    snprintf(url, sizeof url, "redis://nopub:" PASSWORD "@127.0.0.1:%d",
             hl_redis_server_port(server));
    hilock_options *o;
    hilock_client *quiet;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_url(o, url), HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    assert_status(hilock_client_create(&quiet, o), HILOCK_OK);
    hilock_options_free(o);
    hilock_latch *down = new_latch(quiet, name);
    hilock_latch *l = new_latch(client, name);
    hl_plain_sub *java = hl_plain_sub_open(server, ch);

    assert_status(hilock_latch_try_set_count(l, 1, NULL), HILOCK_OK);
    assert_true(hl_plain_sub_next(java, msg, sizeof msg, 5000));
    rec r;
    memset(&r, 0, sizeof r);
    assert_status(hilock_latch_await_async(l, 1000, record, &r, NULL),
                  HILOCK_OK);
    hl_expect_numsub(server, ch, 2, 2);
    assert_status(hilock_latch_count_down(down, NULL), HILOCK_OK);
    assert_int_equal(hl_raw_exists(server, name), 0);
    hl_expect_count(&r.done, 1, hl_widen(3000));
    assert_int_equal(atomic_load(&r.status), HILOCK_OK);
    assert_int_equal(atomic_load(&r.opened), 1);
    /* Nothing was published: the last read found it. */
    assert_false(hl_plain_sub_next(java, msg, sizeof msg, 100));

    hl_plain_sub_close(java);
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
    assert_status(hilock_latch_destroy(down), HILOCK_OK);
    hilock_client_destroy(quiet);
}

/* GETs the server has run so far (INFO commandstats). */
static long long get_calls(void)
{
    char info[8192];
    assert_true(hl_raw_bulk(server, info, sizeof info, "INFO", "commandstats",
                            (char *)NULL));
    const char *at = strstr(info, "cmdstat_get:calls=");
    return at ? atoll(at + strlen("cmdstat_get:calls=")) : 0;
}

/* Awaits wait on messages alone: while nothing happens, five awaits of
 * one client send the server nothing, however long they wait. */
static void test_awaits_do_not_poll(void **state)
{
    (void)state;
    const char *name = "latch:still";
    char ch[128], msg[32];
    channel_of(name, ch, sizeof ch);
    hilock_latch *l = new_latch(client, name);
    assert_status(hilock_latch_try_set_count(l, 1, NULL), HILOCK_OK);
    hl_plain_sub *java = hl_plain_sub_open(server, ch);
    long long before = get_calls();
    rec r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 5; i++)
        assert_status(hilock_latch_await_async(l, HILOCK_WAIT_FOREVER, record,
                                               &r, NULL),
                      HILOCK_OK);
    /* Each reads once when it starts, and once more when the
     * subscription is confirmed unless it was confirmed already when it
     * started (on a slow machine, for the later ones): 5 to 10 reads,
     * and our subscriber on the channel beside the Java one. */
    long long deadline = hl_now_ms() + hl_widen(5000);
    while ((get_calls() < before + 5 || hl_fixture_numsub(server, ch) < 2) &&
           hl_now_ms() < deadline)
        hl_sleep_ms(10);
    long long settled = get_calls();
    assert_true(settled >= before + 5);
    assert_true(hl_fixture_numsub(server, ch) >= 2);
    /* Two seconds with no message: no await reads again.  A confirmation
     * still on its way may add one read per await, no more; polling, even
     * once a second, would add at least ten. */
    assert_false(hl_plain_sub_next(java, msg, sizeof msg, 2000));
    long long quiet = get_calls() - settled;
    if (quiet > 5 || get_calls() > before + 10)
        fail_msg("%lld reads while nothing happened (%lld in all)", quiet,
                 get_calls() - before);
    assert_int_equal(atomic_load(&r.done), 0);

    assert_status(hilock_latch_count_down(l, NULL), HILOCK_OK);
    hl_expect_count(&r.done, 5, message_bound_ms());
    assert_int_equal(atomic_load(&r.opened), 5);
    hl_plain_sub_close(java);
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
}

/* An await is cancelled by its id; the id of an await that ended is no
 * longer found. */
static void test_cancel_by_id(void **state)
{
    (void)state;
    hilock_latch *l = new_latch(client, "latch:cancel");
    assert_status(hilock_latch_try_set_count(l, 1, NULL), HILOCK_OK);
    rec r;
    memset(&r, 0, sizeof r);
    uint64_t id = 0;
    assert_status(hilock_latch_await_async(l, HILOCK_WAIT_FOREVER, record, &r,
                                           &id),
                  HILOCK_OK);
    assert_true(id != 0);
    assert_status(hilock_latch_cancel(l, id), HILOCK_OK);
    hl_expect_count(&r.done, 1, 5000);
    assert_int_equal(atomic_load(&r.status), HILOCK_ECANCELED);
    assert_status(hilock_latch_cancel(l, id), HILOCK_ENOTFOUND);
    assert_status(hilock_latch_cancel(NULL, id), HILOCK_EINVAL);
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
}

/* Delete publishes "1", as Redisson's does; a deleted latch counts 0, so
 * our waiters, who read the count on every message, open at once. */
static void test_delete_wakes_waiters(void **state)
{
    (void)state;
    const char *name = "latch:delete";
    char ch[128], msg[32];
    channel_of(name, ch, sizeof ch);
    hilock_latch *l = new_latch(client, name);
    hl_plain_sub *java = hl_plain_sub_open(server, ch);
    assert_status(hilock_latch_try_set_count(l, 5, NULL), HILOCK_OK);
    assert_true(hl_plain_sub_next(java, msg, sizeof msg, 5000));

    rec r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 3; i++)
        assert_status(hilock_latch_await_async(l, HILOCK_WAIT_FOREVER, record,
                                               &r, NULL),
                      HILOCK_OK);
    hl_expect_numsub(server, ch, 2, 2);
    bool deleted = false;
    assert_status(hilock_latch_delete(l, &deleted), HILOCK_OK);
    assert_true(deleted);
    hl_expect_count(&r.done, 3, message_bound_ms());
    assert_int_equal(atomic_load(&r.opened), 3);
    assert_true(hl_plain_sub_next(java, msg, sizeof msg, 5000));
    assert_string_equal(msg, "1");

    hl_plain_sub_close(java);
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
}

/* A waiter whose handle is destroyed ends with HILOCK_ECANCELED; one whose
 * client closes ends with HILOCK_ECLOSED. */
static void test_waits_end_with_handle_and_client(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(server, NULL);
    hilock_latch *a = new_latch(c, "latch:ends");
    hilock_latch *b = new_latch(c, "latch:ends");
    assert_status(hilock_latch_try_set_count(a, 1, NULL), HILOCK_OK);
    rec ra, rb;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    assert_status(hilock_latch_await_async(a, HILOCK_WAIT_FOREVER, record,
                                           &ra, NULL),
                  HILOCK_OK);
    assert_status(hilock_latch_await_async(b, HILOCK_WAIT_FOREVER, record,
                                           &rb, NULL),
                  HILOCK_OK);
    hl_expect_numsub(server, "redisson_countdownlatch__channel__{latch:ends}",
                     1, 1);
    assert_status(hilock_latch_destroy(a), HILOCK_OK);
    /* Ended by the destroy itself, not by the next re-check. */
    assert_int_equal(atomic_load(&ra.done), 1);
    assert_status(atomic_load(&ra.status), HILOCK_ECANCELED);
    assert_int_equal(atomic_load(&rb.done), 0);
    hilock_client_destroy(c);
    assert_int_equal(atomic_load(&rb.done), 1);
    assert_status(atomic_load(&rb.status), HILOCK_ECLOSED);
    hl_raw_int(server, "DEL", "latch:ends", (char *)NULL);
}

/* ---- a Redisson-behaving peer ------------------------------------------ */

/* Redisson's latch steps, as its RCountDownLatch takes them (from its
 * published behaviour): KEYS name, channel. */
static const char peer_set[] =
    "if redis.call('exists', KEYS[1]) == 0 then "
    "redis.call('set', KEYS[1], ARGV[2]); "
    "redis.call('publish', KEYS[2], ARGV[1]); return 1 end; return 0";
static const char peer_down[] =
    "local v = redis.call('decr', KEYS[1]); "
    "if v <= 0 then redis.call('del', KEYS[1]) end; "
    "if v == 0 then redis.call('publish', KEYS[2], ARGV[1]) end";

static void peer_eval(const char *script, const char *name, const char *a1,
                      const char *a2)
{
    char ch[128], out[64];
    channel_of(name, ch, sizeof ch);
    int t = a2 ? hl_raw_cmd(server, out, sizeof out, "EVAL", script, "2",
                            name, ch, a1, a2, (char *)NULL)
               : hl_raw_cmd(server, out, sizeof out, "EVAL", script, "2",
                            name, ch, a1, (char *)NULL);
    if (t == '-')
        fail_msg("peer script: %s", out);
}

static void test_redisson_peer(void **state)
{
    (void)state;
    const char *name = "latch:peer";
    char ch[128];
    channel_of(name, ch, sizeof ch);
    hilock_latch *l = new_latch(client, name);
    int64_t n = 0;

    /* The peer sets the count, we read it and count down; the peer's
     * count down wakes our waiter. */
    peer_eval(peer_set, name, "1", "3");
    assert_status(hilock_latch_count(l, &n), HILOCK_OK);
    assert_int_equal(n, 3);
    assert_status(hilock_latch_count_down(l, &n), HILOCK_OK);
    assert_int_equal(n, 2);
    rec r;
    memset(&r, 0, sizeof r);
    assert_status(hilock_latch_await_async(l, HILOCK_WAIT_FOREVER, record, &r, NULL),
                  HILOCK_OK);
    hl_expect_numsub(server, ch, 1, 1);
    peer_eval(peer_down, name, "0", NULL);
    assert_int_equal(atomic_load(&r.done), 0);
    peer_eval(peer_down, name, "0", NULL);
    long long zero_at = hl_now_ms();
    hl_expect_count(&r.done, 1, message_bound_ms());
    assert_int_equal(atomic_load(&r.opened), 1);
    assert_true(atomic_load(&r.last_ms) - zero_at < message_bound_ms());

    /* A bare "0" on the channel, as Redisson's count down sends, makes
     * our waiter look: here the peer removed the count without a word
     * first, so only the message can end the wait this soon. */
    assert_status(hilock_latch_try_set_count(l, 1, NULL), HILOCK_OK);
    memset(&r, 0, sizeof r);
    assert_status(hilock_latch_await_async(l, HILOCK_WAIT_FOREVER, record, &r, NULL),
                  HILOCK_OK);
    hl_expect_numsub(server, ch, 1, 1);
    hl_raw_int(server, "DEL", name, (char *)NULL);
    zero_at = hl_now_ms();
    assert_int_equal(hl_raw_int(server, "PUBLISH", ch, "0", (char *)NULL), 1);
    hl_expect_count(&r.done, 1, message_bound_ms());
    assert_int_equal(atomic_load(&r.opened), 1);
    assert_true(atomic_load(&r.last_ms) - zero_at < message_bound_ms());

    /* Our steps as a Redisson waiter sees them: a string count at the
     * name, "1" on try-set and "0" once at zero, on its channel. */
    hl_plain_sub *java = hl_plain_sub_open(server, ch);
    char msg[32], raw[32];
    assert_status(hilock_latch_try_set_count(l, 2, NULL), HILOCK_OK);
    assert_true(hl_raw_bulk(server, raw, sizeof raw, "GET", name,
                            (char *)NULL));
    assert_string_equal(raw, "2");
    assert_true(hl_plain_sub_next(java, msg, sizeof msg, 5000));
    assert_string_equal(msg, "1");
    assert_status(hilock_latch_count_down(l, NULL), HILOCK_OK);
    peer_eval(peer_down, name, "0", NULL);
    assert_true(hl_plain_sub_next(java, msg, sizeof msg, 5000));
    assert_string_equal(msg, "0");
    assert_status(hilock_latch_count_down(l, NULL), HILOCK_OK);
    assert_false(hl_plain_sub_next(java, msg, sizeof msg, 100));
    hl_plain_sub_close(java);
    assert_status(hilock_latch_destroy(l), HILOCK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_down_count),
        cmocka_unit_test(test_async_calls),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_wrong_values),
        cmocka_unit_test(test_many_waiters_woken_at_zero),
        cmocka_unit_test(test_await_timeout),
        cmocka_unit_test(test_missed_message_seen_at_the_end),
        cmocka_unit_test(test_awaits_do_not_poll),
        cmocka_unit_test(test_cancel_by_id),
        cmocka_unit_test(test_delete_wakes_waiters),
        cmocka_unit_test(test_waits_end_with_handle_and_client),
        cmocka_unit_test(test_redisson_peer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
