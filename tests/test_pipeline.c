/* The command path under load and at its edges: many threads sharing one
 * client, batching into few writes, big and oversized replies, teardown
 * with requests still pending, and EVALSHA falling back to EVAL. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/transport/conn.h"
#include "core/runtime/op.h"
#include "core/transport/script.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/loop_call.h"

/* ctest-timeout: 300 */

#define WAIT_MS 60000

static char reply_buf[65536];

static hilock_client *connect_with(const hl_redis_server *s,
                                   hilock_options *o)
{
    hilock_client *c = NULL;

    assert_int_equal(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_int_equal(hilock_options_set_port(o, hl_redis_server_port(s)),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

static hilock_options *new_options(void)
{
    hilock_options *o = NULL;

    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    return o;
}

static hilock_client *connect_plain(const hl_redis_server *s)
{
    return connect_with(s, new_options());
}

static long long sync_integer(hilock_client *c, int argc,
                              const char *const *argv)
{
    hilock_reply *r = NULL;
    long long v;

    assert_int_equal(hilock_client_command(c, argc, argv, NULL, &r),
                     HILOCK_OK);
    assert_non_null(r);
    assert_int_equal(r->type, HILOCK_REPLY_INTEGER);
    v = r->integer;
    hilock_reply_free(r);
    return v;
}

static int sync_status(hilock_client *c, int argc, const char *const *argv)
{
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, argc, argv, NULL, &r);

    hilock_reply_free(r);
    return rc;
}

/* Each status a callback saw, counted; every field is bumped on the loop
 * thread and read by the test thread. */
struct tally {
    atomic_int total;
    atomic_int ok;
    atomic_int closed;
    atomic_int eio;
    atomic_int toobig;
    atomic_int other;
};

static void tally_init(struct tally *t)
{
    atomic_init(&t->total, 0);
    atomic_init(&t->ok, 0);
    atomic_init(&t->closed, 0);
    atomic_init(&t->eio, 0);
    atomic_init(&t->toobig, 0);
    atomic_init(&t->other, 0);
}

static void tally_cb(hilock_client *c, int status, hilock_reply *r,
                     void *user)
{
    struct tally *t = user;

    (void)c;
    hilock_reply_free(r);
    if (status == HILOCK_OK)
        atomic_fetch_add(&t->ok, 1);
    else if (status == HILOCK_ECLOSED)
        atomic_fetch_add(&t->closed, 1);
    else if (status == HILOCK_EIO)
        atomic_fetch_add(&t->eio, 1);
    else if (status == HILOCK_ETOOBIG)
        atomic_fetch_add(&t->toobig, 1);
    else
        atomic_fetch_add(&t->other, 1);
    atomic_fetch_add(&t->total, 1);
}

/* ---- 1: many threads, one client, replies in order ------------------ */

#define STREAMS 8

struct stream {
    hilock_client *client;
    pthread_barrier_t *start;
    atomic_int *all_done;
    char key[32];
    int n;
    int submit_failures;
    /* Written by the loop thread only, published by all_done. */
    long long *values;
    int received;
    int bad;
};

static void stream_reply(hilock_client *c, int status, hilock_reply *r,
                         void *user)
{
    struct stream *st = user;

    (void)c;
    if (status != HILOCK_OK || r == NULL ||
        r->type != HILOCK_REPLY_INTEGER)
        st->bad++;
    else if (st->received < st->n)
        st->values[st->received] = r->integer;
    st->received++;
    hilock_reply_free(r);
    atomic_fetch_add(st->all_done, 1);
}

static void *stream_main(void *arg)
{
    struct stream *st = arg;
    const char *argv[] = { "INCR", st->key };

    pthread_barrier_wait(st->start);
    for (int i = 0; i < st->n; i++)
        if (hilock_client_command_async(st->client, 2, argv, NULL,
                                        stream_reply, st) != HILOCK_OK)
            st->submit_failures++;
    return NULL;
}

static void test_threads_share_one_client(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct stream st[STREAMS];
    pthread_t tid[STREAMS];
    pthread_barrier_t start;
    atomic_int all_done;
    /* Valgrind runs the same assertions on fewer iterations, since it is
     * there to find memory errors, not to reproduce the load. */
    int per = hl_scaled(100000, 10000) / STREAMS;
    const char *ping[] = { "PING" };

    (void)state;
    atomic_init(&all_done, 0);
    pthread_barrier_init(&start, NULL, STREAMS);
    for (int t = 0; t < STREAMS; t++) {
        memset(&st[t], 0, sizeof st[t]);
        st[t].client = c;
        st[t].start = &start;
        st[t].all_done = &all_done;
        st[t].n = per;
        st[t].values = calloc((size_t)per, sizeof *st[t].values);
        assert_non_null(st[t].values);
        snprintf(st[t].key, sizeof st[t].key, "ctr:%d", t);
    }
    for (int t = 0; t < STREAMS; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, stream_main, &st[t]),
                         0);
    for (int t = 0; t < STREAMS; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&start);
    hl_expect_count(&all_done, STREAMS * per, WAIT_MS);

    /* Every earlier reply is dispatched before this one, so a callback
     * that fired twice would show in the counts below. */
    assert_int_equal(sync_status(c, 1, ping), HILOCK_OK);
    assert_int_equal(atomic_load(&all_done), STREAMS * per);
    for (int t = 0; t < STREAMS; t++) {
        assert_int_equal(st[t].submit_failures, 0);
        assert_int_equal(st[t].bad, 0);
        assert_int_equal(st[t].received, per);
        for (int i = 0; i < per; i++)
            if (st[t].values[i] != i + 1)
                fail_msg("stream %d: reply %d is %lld, expected %d", t, i,
                         st[t].values[i], i + 1);
        free(st[t].values);
    }
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 2: one loop iteration, one write ------------------------------- */

struct batch {
    int n;
    int submit_failures;
    int pongs;
    int seen;
    uint64_t writes_before;
    uint64_t writes_after;
    atomic_int done;
};

static void batch_reply(hilock_client *c, int status, hilock_reply *r,
                        void *user)
{
    struct batch *b = user;

    if (status == HILOCK_OK && r != NULL &&
        r->type == HILOCK_REPLY_STATUS && strcmp(r->str, "PONG") == 0)
        b->pongs++;
    hilock_reply_free(r);
    if (++b->seen == b->n)
        b->writes_after = hl_conn_get_stats(c->conn).writes;
    atomic_fetch_add(&b->done, 1);
}

static void batch_start(hilock_client *c, void *arg)
{
    struct batch *b = arg;
    const char *ping[] = { "PING" };

    b->writes_before = hl_conn_get_stats(c->conn).writes;
    for (int i = 0; i < b->n; i++)
        if (hilock_client_command_async(c, 1, ping, NULL, batch_reply, b) !=
            HILOCK_OK)
            b->submit_failures++;
}

static void test_auto_pipelining(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct batch b;

    (void)state;
    memset(&b, 0, sizeof b);
    b.n = 1000;
    atomic_init(&b.done, 0);
    hl_run_on_loop_within(c, batch_start, &b, WAIT_MS);
    hl_expect_count(&b.done, b.n, WAIT_MS);
    assert_int_equal(b.submit_failures, 0);
    assert_int_equal(b.pongs, b.n);
    /* 14 KB of PINGs fit one socket write; a few more are tolerated only
     * for a send buffer that fills up. */
    assert_true(b.writes_after > b.writes_before);
    if (b.writes_after - b.writes_before > 3)
        fail_msg("%d commands took %llu writes", b.n,
                 (unsigned long long)(b.writes_after - b.writes_before));
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 3: sync calls from many threads -------------------------------- */

struct incr_worker {
    hilock_client *client;
    int n;
    int failures;
    char first_detail[200];
    int64_t longest_ms;
    int64_t lost_wake_ms; /* a call this long missed its wake-up; 0: no check */
};

static void *incr_main(void *arg)
{
    struct incr_worker *w = arg;
    const char *argv[] = { "INCR", "shared" };

    for (int i = 0; i < w->n; i++) {
        hilock_reply *r = NULL;
        int64_t start = hl_now_ms();
        int rc = hilock_client_command(w->client, 2, argv, NULL, &r);

        if (hl_now_ms() - start > w->longest_ms)
            w->longest_ms = hl_now_ms() - start;
        if (w->lost_wake_ms > 0 && w->longest_ms >= w->lost_wake_ms) {
            hilock_reply_free(r);
            w->failures++;
            snprintf(w->first_detail, sizeof w->first_detail,
                     "waited %lld ms for one answer: a lost wake-up",
                     (long long)w->longest_ms);
            break;
        }
        if (rc != HILOCK_OK || r == NULL ||
            r->type != HILOCK_REPLY_INTEGER) {
            if (w->failures++ == 0)
                snprintf(w->first_detail, sizeof w->first_detail, "%s: %s",
                         hilock_strerror(rc),
                         rc != HILOCK_OK ? hilock_last_error() : "no integer");
        }
        hilock_reply_free(r);
    }
    return NULL;
}

static void sync_from_threads(hilock_client *c, hl_redis_server *s,
                              int threads, int per, int64_t lost_wake_ms);

static void test_sync_from_threads(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    sync_from_threads(connect_plain(s), s, STREAMS, hl_scaled(2000, 200), 0);
}

/* Blocked callers share 128 wake bits: with more threads than that, a
 * caller woken for its neighbour's answer goes back to sleep, and none
 * misses its own.  A missed one is not an error: the caller finds its
 * answer when its blocking limit (twice the command timeout, plus a
 * second) runs out, so that is what is checked.  The command timeout is
 * wide because valgrind may starve the loop thread for seconds among 300
 * runnable threads; the check holds at any timeout. */
static void test_sync_more_threads_than_wake_bits(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = new_options();
    int timeout_ms = hl_widen(3000);
    int threads = 300;
    int per = hl_scaled(200, 20);

    assert_int_equal(hilock_options_set_command_timeout_ms(o, timeout_ms),
                     HILOCK_OK);
    sync_from_threads(connect_with(s, o), s, threads, per, 2 * timeout_ms);
}

/* The same with busy polling: the loop stays awake while requests are
 * outstanding, and everything else behaves the same. */
static void test_sync_from_threads_busy_poll(void **state)
{
    (void)state;
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = new_options();
    assert_int_equal(hilock_options_set_busy_poll_us(o, 100), HILOCK_OK);
    sync_from_threads(connect_with(s, o), s, STREAMS, hl_scaled(2000, 200),
                      0);
}

/* Each of threads makes per blocking INCRs; every one must succeed, and
 * none may take lost_wake_ms or longer (0: no bound). */
static void sync_from_threads(hilock_client *c, hl_redis_server *s,
                              int threads, int per, int64_t lost_wake_ms)
{
    struct incr_worker *w = calloc((size_t)threads, sizeof *w);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    const char *get[] = { "GET", "shared" };
    hilock_reply *r = NULL;

    assert_non_null(w);
    assert_non_null(tid);
    for (int t = 0; t < threads; t++) {
        w[t].client = c;
        w[t].n = per;
        w[t].failures = 0;
        w[t].lost_wake_ms = lost_wake_ms;
        assert_int_equal(pthread_create(&tid[t], NULL, incr_main, &w[t]),
                         0);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < threads; t++)
        if (w[t].failures != 0)
            fail_msg("thread %d: %d of %d failed, first %s", t,
                     w[t].failures, per, w[t].first_detail);
    assert_int_equal(hilock_client_command(c, 2, get, NULL, &r), HILOCK_OK);
    assert_int_equal(r->type, HILOCK_REPLY_STRING);
    assert_int_equal(strtoll(r->str, NULL, 10), (long long)threads * per);
    hilock_reply_free(r);
    free(w);
    free(tid);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 4: binary and big values --------------------------------------- */

#define BIG (1024 * 1024)

static char *make_big_value(void)
{
    char *v = malloc(BIG);

    assert_non_null(v);
    /* NULs and CRLFs inside, to catch any length taken from strlen or a
     * line-oriented parse. */
    for (size_t i = 0; i < BIG; i++)
        v[i] = (char)((i * 2654435761u) >> 13);
    memcpy(v + 1000, "\r\n\0\r\n$-1\r\n", 10);
    return v;
}

static void test_big_binary_value(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    char *v = make_big_value();
    static const char key[] = "bin\0key";
    const char *set[] = { "SET", key, v };
    size_t set_len[] = { 3, sizeof key - 1, BIG };
    const char *get[] = { "GET", key };
    size_t get_len[] = { 3, sizeof key - 1 };
    hilock_reply *r = NULL;

    (void)state;
    assert_int_equal(hilock_client_command(c, 3, set, set_len, &r),
                     HILOCK_OK);
    hilock_reply_free(r);
    assert_int_equal(hilock_client_command(c, 2, get, get_len, &r),
                     HILOCK_OK);
    assert_non_null(r);
    assert_int_equal(r->type, HILOCK_REPLY_STRING);
    assert_int_equal(r->len, BIG);
    assert_memory_equal(r->str, v, BIG);
    assert_int_equal(r->str[BIG], '\0');
    hilock_reply_free(r);

    /* The key is binary too: "bin" alone must not find the value. */
    {
        const char *get_bin[] = { "GET", "bin" };

        assert_int_equal(hilock_client_command(c, 2, get_bin, NULL, &r),
                         HILOCK_OK);
        assert_int_equal(r->type, HILOCK_REPLY_NIL);
        hilock_reply_free(r);
    }
    free(v);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 5: replies beyond the bounds ----------------------------------- */

static int lrange(hilock_client *c, const char *stop, size_t *elements)
{
    const char *argv[] = { "LRANGE", "list", "0", stop };
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 4, argv, NULL, &r);

    *elements = r != NULL && r->type == HILOCK_REPLY_ARRAY ? r->elements : 0;
    hilock_reply_free(r);
    return rc;
}

struct ping_ok {
    hilock_client *client;
};

static bool ping_succeeds(void *arg)
{
    const char *ping[] = { "PING" };

    return sync_status(((struct ping_ok *)arg)->client, 1, ping) ==
           HILOCK_OK;
}

static void test_reply_too_many_bytes(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *writer = connect_plain(s);
    hilock_options *o = new_options();
    hilock_client *bounded;
    char *v = make_big_value();
    const char *set_big[] = { "SET", "big", v };
    size_t set_big_len[] = { 3, 3, BIG };
    const char *set_small[] = { "SET", "small", v };
    size_t set_small_len[] = { 3, 5, 32 * 1024 };
    const char *get_big[] = { "GET", "big" };
    const char *get_small[] = { "GET", "small" };
    hilock_reply *r = NULL;
    struct ping_ok arg;

    (void)state;
    assert_int_equal(hilock_options_set_max_reply_bytes(o, 64 * 1024),
                     HILOCK_OK);
    bounded = connect_with(s, o);
    assert_int_equal(hilock_client_command(writer, 3, set_big, set_big_len,
                                           &r), HILOCK_OK);
    hilock_reply_free(r);
    assert_int_equal(hilock_client_command(writer, 3, set_small,
                                           set_small_len, &r), HILOCK_OK);
    hilock_reply_free(r);

    assert_int_equal(hilock_client_command(bounded, 2, get_big, NULL, &r),
                     HILOCK_ETOOBIG);
    assert_null(r);
    assert_true(hilock_last_error()[0] != '\0');

    /* The connection was reset mid-reply; the client must come back by
     * itself and stay usable for replies within the bound. */
    arg.client = bounded;
    assert_true(hl_wait_until(ping_succeeds, &arg, WAIT_MS));
    assert_int_equal(hilock_client_command(bounded, 2, get_small, NULL, &r),
                     HILOCK_OK);
    assert_int_equal(r->len, 32 * 1024);
    assert_memory_equal(r->str, v, 32 * 1024);
    hilock_reply_free(r);

    /* Requests written behind the oversized reply are lost with the
     * connection, each reported once. */
    {
        struct tally big, rest;

        tally_init(&big);
        tally_init(&rest);
        assert_int_equal(hilock_client_command_async(bounded, 2, get_big,
                                                     NULL, tally_cb, &big),
                         HILOCK_OK);
        for (int i = 0; i < 10; i++)
            assert_int_equal(hilock_client_command_async(
                                 bounded, 2, get_small, NULL, tally_cb,
                                 &rest),
                             HILOCK_OK);
        hl_expect_count(&big.total, 1, WAIT_MS);
        hl_expect_count(&rest.total, 10, WAIT_MS);
        assert_int_equal(atomic_load(&big.toobig), 1);
        assert_int_equal(atomic_load(&rest.ok) + atomic_load(&rest.eio),
                         10);
        assert_true(hl_wait_until(ping_succeeds, &arg, WAIT_MS));
        assert_int_equal(atomic_load(&big.total), 1);
        assert_int_equal(atomic_load(&rest.total), 10);
    }

    free(v);
    hilock_client_destroy(bounded);
    hilock_client_destroy(writer);
    hl_redis_server_stop(s);
}

static void test_reply_bytes_across_elements(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = new_options();
    hilock_client *c;
    char item[1024];
    const char *rpush[] = { "RPUSH", "list", item };
    size_t rpush_len[] = { 5, 4, sizeof item };
    size_t n = 0;
    struct ping_ok arg;

    (void)state;
    assert_int_equal(hilock_options_set_max_reply_bytes(o, 64 * 1024),
                     HILOCK_OK);
    c = connect_with(s, o);
    memset(item, 'x', sizeof item);
    for (int i = 0; i < 100; i++) {
        hilock_reply *r = NULL;

        assert_int_equal(hilock_client_command(c, 3, rpush, rpush_len, &r),
                         HILOCK_OK);
        hilock_reply_free(r);
    }
    /* No element is big, but together they pass the bound halfway
     * through the array: the half-built reply must be dropped whole. */
    assert_int_equal(lrange(c, "-1", &n), HILOCK_ETOOBIG);
    arg.client = c;
    assert_true(hl_wait_until(ping_succeeds, &arg, WAIT_MS));
    assert_int_equal(lrange(c, "31", &n), HILOCK_OK);
    assert_int_equal(n, 32);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}


static void test_reply_too_many_elements(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *writer = connect_plain(s);
    hilock_options *o = new_options();
    hilock_client *bounded;
    const char *argv[1002];
    char items[1000][8];
    size_t n = 0;
    struct ping_ok arg;

    (void)state;
    assert_int_equal(hilock_options_set_max_reply_elements(o, 100),
                     HILOCK_OK);
    bounded = connect_with(s, o);
    argv[0] = "RPUSH";
    argv[1] = "list";
    for (int i = 0; i < 1000; i++) {
        snprintf(items[i], sizeof items[i], "%d", i);
        argv[2 + i] = items[i];
    }
    assert_int_equal(sync_integer(writer, 1002, argv), 1000);

    assert_int_equal(lrange(bounded, "-1", &n), HILOCK_ETOOBIG);
    assert_int_equal(n, 0);
    arg.client = bounded;
    assert_true(hl_wait_until(ping_succeeds, &arg, WAIT_MS));

    /* The bound itself is allowed; one more is not. */
    assert_int_equal(lrange(bounded, "99", &n), HILOCK_OK);
    assert_int_equal(n, 100);
    assert_int_equal(lrange(bounded, "100", &n), HILOCK_ETOOBIG);
    assert_true(hl_wait_until(ping_succeeds, &arg, WAIT_MS));

    hilock_client_destroy(bounded);
    hilock_client_destroy(writer);
    hl_redis_server_stop(s);
}

/* ---- 6: close with requests pending --------------------------------- */

static void read_bytes_written(hilock_client *c, void *arg)
{
    *(uint64_t *)arg = hl_conn_get_stats(c->conn).bytes_written;
}

struct written_wait {
    hilock_client *client;
    uint64_t want;
};

static bool written_reached(void *arg)
{
    struct written_wait *w = arg;
    uint64_t now = 0;

    hl_run_on_loop_within(w->client, read_bytes_written, &now, WAIT_MS);
    return now >= w->want;
}

static void test_close_with_pending(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    const char *ping[] = { "PING" };
    struct written_wait w;
    struct tally t;
    int total;

    (void)state;
    tally_init(&t);
    hl_run_on_loop_within(c, read_bytes_written, &w.want, WAIT_MS);
    w.client = c;
    /* A PING is 14 bytes on the wire. */
    w.want += 100 * 14;
    /* The server sits in DEBUG SLEEP, so none of these can be answered
     * before the close. */
    hl_fixture_debug_sleep(s, 1.0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                     tally_cb, &t),
                         HILOCK_OK);
    /* Written, not merely queued: the close has to fail requests that
     * are on the wire. */
    assert_true(hl_wait_until(written_reached, &w, WAIT_MS));
    assert_int_equal(atomic_load(&t.total), 0);
    assert_int_equal(hilock_client_close(c), HILOCK_OK);
    /* close waited for the loop thread: everything has happened. */
    total = atomic_load(&t.total);
    assert_int_equal(total, 100);
    assert_int_equal(atomic_load(&t.closed), 100);

    assert_int_equal(hilock_client_close(c), HILOCK_ECLOSED);
    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL, tally_cb,
                                                 &t),
                     HILOCK_ECLOSED);
    assert_int_equal(sync_status(c, 1, ping), HILOCK_ECLOSED);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    assert_int_equal(atomic_load(&t.total), 100);
    hl_redis_server_stop(s);
}

static bool is_disconnected(void *arg)
{
    return hilock_client_is_connected(arg) == 0;
}

static void test_close_with_unwritten(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = new_options();
    hilock_client *c;
    const char *ping[] = { "PING" };
    struct tally t;

    (void)state;
    tally_init(&t);
    assert_int_equal(hilock_options_set_command_timeout_ms(o, 60000),
                     HILOCK_OK);
    c = connect_with(s, o);
    /* With the server gone these wait for a connection, never written:
     * the close is the only thing that can complete them. */
    hl_fixture_kill9(s);
    assert_true(hl_wait_until(is_disconnected, c, WAIT_MS));
    for (int i = 0; i < 50; i++)
        assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                     tally_cb, &t),
                         HILOCK_OK);
    /* Tasks run in order: past this one, all fifty sit in the
     * connection's queue rather than in the hand-over queue, which the
     * close would complete by another path. */
    hl_run_on_loop_within(c, NULL, NULL, WAIT_MS);
    assert_int_equal(atomic_load(&t.total), 0);
    assert_int_equal(hilock_client_close(c), HILOCK_OK);
    assert_int_equal(atomic_load(&t.total), 50);
    assert_int_equal(atomic_load(&t.closed), 50);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    assert_int_equal(atomic_load(&t.total), 50);
    hl_redis_server_stop(s);
}

/* Holds the loop thread until the client is marked closed, so that work
 * handed over meanwhile is still in the hand-over queue at the close. */
struct gate {
    hl_op op; /* first: the loop thread hands back this pointer */
    atomic_bool entered;
    atomic_bool saw_close;
    atomic_bool released;
};

static void gate_start(hl_op *op)
{
    struct gate *g = (struct gate *)op;
    hilock_client *c = op->home;
    int64_t deadline = hl_now_ms() + WAIT_MS;
    bool seen = false;

    atomic_store(&g->entered, true);
    while (!seen && hl_now_ms() < deadline) {
        pthread_mutex_lock(&c->lock);
        seen = c->closed;
        pthread_mutex_unlock(&c->lock);
        if (!seen)
            hl_sleep_ms(1);
    }
    atomic_store(&g->saw_close, seen);
    hl_op_done(op, HILOCK_OK, 0, NULL, NULL);
}

/* The loop's last touch of the gate, which lives on the test's stack. */
static void gate_destroy(hl_op *op)
{
    atomic_store(&((struct gate *)op)->released, true);
}

static const hl_op_type gate_type = {
    .start = gate_start,
    .destroy = gate_destroy,
};

static void test_close_with_queued_tasks(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    const char *ping[] = { "PING" };
    struct gate g;
    struct tally t;

    (void)state;
    tally_init(&t);
    hl_op_init(&g.op, &gate_type);
    atomic_init(&g.entered, false);
    atomic_init(&g.saw_close, false);
    atomic_init(&g.released, false);
    assert_int_equal(hl_op_submit(c, &g.op), HILOCK_OK);
    assert_true(hl_wait_flag(&g.entered, WAIT_MS));
    for (int i = 0; i < 50; i++)
        assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                     tally_cb, &t),
                         HILOCK_OK);
    assert_int_equal(atomic_load(&t.total), 0);
    assert_int_equal(hilock_client_close(c), HILOCK_OK);
    assert_true(atomic_load(&g.saw_close));
    assert_true(atomic_load(&g.released));
    assert_int_equal(atomic_load(&t.total), 50);
    assert_int_equal(atomic_load(&t.closed), 50);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    assert_int_equal(atomic_load(&t.total), 50);
    hl_redis_server_stop(s);
}

/* ---- 7: destroy inside a callback ----------------------------------- */

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static bool threads_back_to(void *arg)
{
    return thread_count() <= *(int *)arg;
}

struct destroyer {
    atomic_int destroy_rc;
    atomic_int second_rc;
    atomic_int sync_rc;
    atomic_bool returned;
    struct tally others;
    int n_others;
    int submit_failures;
};

static void destroyer_init(struct destroyer *d, int n_others)
{
    atomic_init(&d->destroy_rc, -1);
    atomic_init(&d->second_rc, -1);
    atomic_init(&d->sync_rc, -1);
    atomic_init(&d->returned, false);
    tally_init(&d->others);
    d->n_others = n_others;
    d->submit_failures = 0;
}

static void destroy_in_callback(hilock_client *c, int status,
                                hilock_reply *r, void *user)
{
    struct destroyer *d = user;
    const char *ping[] = { "PING" };

    (void)status;
    hilock_reply_free(r);
    atomic_store(&d->sync_rc, sync_status(c, 1, ping));
    atomic_store(&d->destroy_rc, hilock_client_destroy(c));
    /* A stale handle is reported, not touched. */
    atomic_store(&d->second_rc, hilock_client_destroy(c));
    atomic_store(&d->returned, true);
}

static void destroyer_start(hilock_client *c, void *arg)
{
    struct destroyer *d = arg;
    const char *ping[] = { "PING" };

    /* All from one loop iteration: none can be answered, and so none can
     * destroy the client, before the last is queued.  No cmocka asserts
     * here, since this may run on the client's loop thread. */
    if (hilock_client_command_async(c, 1, ping, NULL, destroy_in_callback,
                                    d) != HILOCK_OK)
        d->submit_failures++;
    for (int i = 0; i < d->n_others; i++)
        if (hilock_client_command_async(c, 1, ping, NULL, tally_cb,
                                        &d->others) != HILOCK_OK)
            d->submit_failures++;
}

static void test_destroy_in_callback_own_loop(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    int baseline = thread_count();
    hilock_client *c = connect_plain(s);
    struct destroyer d;

    (void)state;
    destroyer_init(&d, 50);
    hl_run_on_loop_within(c, destroyer_start, &d, WAIT_MS);
    assert_int_equal(d.submit_failures, 0);
    assert_true(hl_wait_flag(&d.returned, WAIT_MS));
    assert_int_equal(atomic_load(&d.sync_rc), HILOCK_EDEADLK);
    assert_int_equal(atomic_load(&d.destroy_rc), HILOCK_OK);
    assert_int_equal(atomic_load(&d.second_rc), HILOCK_ECLOSED);
    /* The loop thread frees the client and ends on its own; once it is
     * gone no callback can still be on its way. */
    assert_true(hl_wait_until(threads_back_to, &baseline, WAIT_MS));
    assert_int_equal(atomic_load(&d.others.total), d.n_others);
    assert_int_equal(atomic_load(&d.others.other), 0);
    hl_redis_server_stop(s);
}

static bool guard_fired;

static void guard_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    guard_fired = true;
    ev_break(loop, EVBREAK_ALL);
}

static void test_destroy_in_callback_user_loop(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    hilock_options *o = new_options();
    hilock_client *c;
    struct destroyer d;
    ev_timer guard;

    (void)state;
    assert_non_null(loop);
    assert_int_equal(hilock_options_set_loop(o, loop), HILOCK_OK);
    c = connect_with(s, o);
    destroyer_init(&d, 20);
    /* This thread is the loop's: the calls act at once and queue until
     * the loop runs and connects. */
    destroyer_start(c, &d);
    assert_int_equal(d.submit_failures, 0);

    /* The guard does not keep the loop alive (ev_unref), so ev_run ends
     * by itself exactly when the client has left no watcher behind. */
    guard_fired = false;
    ev_timer_init(&guard, guard_cb, 30.0, 0.0);
    ev_timer_start(loop, &guard);
    ev_unref(loop);
    ev_run(loop, 0);
    ev_ref(loop);
    ev_timer_stop(loop, &guard);
    assert_false(guard_fired);

    assert_true(atomic_load(&d.returned));
    assert_int_equal(atomic_load(&d.sync_rc), HILOCK_EDEADLK);
    assert_int_equal(atomic_load(&d.destroy_rc), HILOCK_OK);
    assert_int_equal(atomic_load(&d.second_rc), HILOCK_ECLOSED);
    assert_int_equal(atomic_load(&d.others.total), d.n_others);
    assert_int_equal(atomic_load(&d.others.other), 0);
    ev_loop_destroy(loop);
    hl_redis_server_stop(s);
}

/* ---- 8: EVALSHA, NOSCRIPT, EVAL ------------------------------------- */

static hl_script echo_script;

struct script_job {
    const char *arg;
    int rc;
    int status;
    char value[64];
    atomic_bool done;
};

static void script_done(void *data, int status, hilock_reply *r)
{
    struct script_job *j = data;

    j->status = status;
    if (r != NULL)
        snprintf(j->value, sizeof j->value, "%.*s", (int)r->len,
                 r->str ? r->str : "");
    hilock_reply_free(r);
    atomic_store(&j->done, true);
}

static void script_start(hilock_client *c, void *arg)
{
    struct script_job *j = arg;
    const char *argv[] = { j->arg };
    size_t lens[] = { strlen(j->arg) };

    j->rc = hl_script_run(c->conn, &echo_script, 0, 1, argv, lens,
                          script_done, j);
    if (j->rc != HILOCK_OK)
        atomic_store(&j->done, true);
}

static void run_echo(hilock_client *c, const char *arg)
{
    struct script_job j;

    memset(&j, 0, sizeof j);
    j.arg = arg;
    atomic_init(&j.done, false);
    hl_run_on_loop_within(c, script_start, &j, WAIT_MS);
    assert_int_equal(j.rc, HILOCK_OK);
    assert_true(hl_wait_flag(&j.done, WAIT_MS));
    if (j.status != HILOCK_OK)
        fail_msg("script run failed with %s: %s", hilock_errname(j.status),
                 j.value);
    assert_string_equal(j.value, arg);
}

static bool script_loaded(hl_redis_server *s)
{
    int t = hl_redis_server_cmd(s, reply_buf, sizeof reply_buf, "SCRIPT",
                                "EXISTS", echo_script.sha1, (char *)NULL);

    assert_int_equal(t, '*');
    return strcmp(reply_buf, "*1\r\n:1\r\n") == 0;
}

static void test_noscript_fallback(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    long long evals, evalshas;

    (void)state;
    hl_script_init(&echo_script, "return ARGV[1]");
    assert_false(script_loaded(s));
    run_echo(c, "first");
    assert_true(script_loaded(s));

    /* Loaded: one EVALSHA, no EVAL. */
    evals = hl_fixture_calls(s, "eval");
    evalshas = hl_fixture_calls(s, "evalsha");
    run_echo(c, "second");
    assert_int_equal(hl_fixture_calls(s, "eval"), evals);
    assert_int_equal(hl_fixture_calls(s, "evalsha"), evalshas + 1);

    assert_int_equal(hl_redis_server_cmd(s, reply_buf, sizeof reply_buf,
                                         "SCRIPT", "FLUSH", (char *)NULL),
                     '+');
    assert_false(script_loaded(s));
    /* Forgotten: the caller never sees NOSCRIPT, and one EVAL both runs
     * the script and loads it again. */
    run_echo(c, "after flush");
    assert_int_equal(hl_fixture_calls(s, "eval"), evals + 1);
    assert_true(script_loaded(s));

    evalshas = hl_fixture_calls(s, "evalsha");
    run_echo(c, "hit again");
    assert_int_equal(hl_fixture_calls(s, "eval"), evals + 1);
    assert_int_equal(hl_fixture_calls(s, "evalsha"), evalshas + 1);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* A script run whose SHA1 the server has forgotten must still run in its
 * place among the requests sent after it: an unlock overtaken by the
 * next lock of the same name would undo the wrong hold. */
static hl_script push_script;

struct ordered {
    int order[2]; /* which completion came first: 1 script, 2 command */
    int n;
    int status[2];
    int rc;
    atomic_int done;
};

static void ordered_record(struct ordered *o, int who, int status)
{
    if (o->n < 2) {
        o->order[o->n] = who;
        o->status[o->n] = status;
    }
    o->n++;
    atomic_fetch_add(&o->done, 1);
}

static void ordered_script_done(void *data, int status, hilock_reply *r)
{
    hilock_reply_free(r);
    ordered_record(data, 1, status);
}

static void ordered_command_done(hilock_client *c, int status,
                                 hilock_reply *r, void *user)
{
    (void)c;
    hilock_reply_free(r);
    ordered_record(user, 2, status);
}

static void ordered_start(hilock_client *c, void *arg)
{
    struct ordered *o = arg;
    const char *keys_args[] = { "order", "first" };
    size_t lens[] = { 5, 5 };
    const char *rpush[] = { "RPUSH", "order", "second" };

    o->rc = hl_script_run(c->conn, &push_script, 1, 2, keys_args, lens,
                          ordered_script_done, o);
    if (o->rc == HILOCK_OK)
        o->rc = hilock_client_command_async(c, 3, rpush, NULL,
                                            ordered_command_done, o);
}

static void test_noscript_keeps_order(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_plain(s);
    struct ordered o;

    (void)state;
    hl_script_init(&push_script,
                   "return redis.call('RPUSH', KEYS[1], ARGV[1])");
    memset(&o, 0, sizeof o);
    atomic_init(&o.done, 0);
    hl_run_on_loop_within(c, ordered_start, &o, WAIT_MS);
    assert_int_equal(o.rc, HILOCK_OK);
    hl_expect_count(&o.done, 2, WAIT_MS);
    assert_int_equal(o.n, 2);
    assert_int_equal(o.status[0], HILOCK_OK);
    assert_int_equal(o.status[1], HILOCK_OK);
    assert_int_equal(hl_redis_server_cmd(s, reply_buf, sizeof reply_buf,
                                         "LRANGE", "order", "0", "-1",
                                         (char *)NULL),
                     '*');
    if (strcmp(reply_buf, "*2\r\n$5\r\nfirst\r\n$6\r\nsecond\r\n") !=
        0) {
        for (char *p = reply_buf; *p != '\0'; p++)
            if (*p == '\r' || *p == '\n')
                *p = ' ';
        fail_msg("the script ran after the command sent behind it; "
                 "LRANGE order 0 -1 is %s", reply_buf);
    }
    /* Replies come back in the order the requests were made, too. */
    assert_int_equal(o.order[0], 1);
    assert_int_equal(o.order[1], 2);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 10: a bound on unfinished operations ---------------------------- */

static void on_acquire_tally(hilock_lock *lock, int status,
                             const hilock_acquired *got, void *user)
{
    (void)lock;
    (void)got;
    (void)status;
    atomic_fetch_add((atomic_int *)user, 1);
}

/* A server that stops answering must not let a client queue requests
 * without end: past max_pending the call itself says no, at once, and
 * nothing of it starts; answered operations make room again. */
static void test_max_pending_refuses_at_once(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_options *o = new_options();
    const char *ping[] = { "PING" };
    struct tally t;
    atomic_int acquired;
    hilock_client *c;
    hilock_lock *lock = NULL;
    int accepted = 0, refused = 0, other = 0;

    (void)state;
    tally_init(&t);
    atomic_init(&acquired, 0);
    assert_int_equal(hilock_options_set_max_pending(o, 100), HILOCK_OK);
    assert_int_equal(hilock_options_set_command_timeout_ms(o, 60000),
                     HILOCK_OK);
    c = connect_with(s, o);
    assert_int_equal(hilock_lock_create(&lock, c, "max-pending"),
                     HILOCK_OK);
    hl_fixture_pause(s);
    for (int i = 0; i < 150; i++) {
        int rc = hilock_client_command_async(c, 1, ping, NULL, tally_cb, &t);

        if (rc == HILOCK_OK) {
            accepted++;
        } else if (rc == HILOCK_EFULL) {
            refused++;
            assert_non_null(strstr(hilock_last_error(), "max_pending"));
        } else {
            other++;
        }
    }
    assert_int_equal(accepted, 100);
    assert_int_equal(refused, 50);
    assert_int_equal(other, 0);
    /* Blocking calls and lock calls count against the same bound. */
    assert_int_equal(sync_status(c, 1, ping), HILOCK_EFULL);
    assert_int_equal(hilock_lock_acquire_async(lock, 7, 0,
                                               HILOCK_LEASE_WATCHDOG, 0,
                                               on_acquire_tally, &acquired,
                                               NULL),
                     HILOCK_EFULL);
    assert_int_equal(atomic_load(&t.total), 0);
    hl_fixture_resume(s);
    hl_expect_count(&t.total, 100, WAIT_MS);
    assert_int_equal(atomic_load(&t.ok), 100);
    /* Every answer gave its place back. */
    assert_int_equal(sync_status(c, 1, ping), HILOCK_OK);
    assert_int_equal(hilock_lock_acquire_async(lock, 7, 0,
                                               HILOCK_LEASE_WATCHDOG, 0,
                                               on_acquire_tally, &acquired,
                                               NULL),
                     HILOCK_OK);
    hl_expect_count(&acquired, 1, WAIT_MS);
    assert_int_equal(atomic_load(&c->pending_ops), 0);
    assert_int_equal(hilock_lock_destroy(lock), HILOCK_OK);
    assert_int_equal(hilock_client_destroy(c), HILOCK_OK);
    hl_redis_server_stop(s);
}

static void test_max_pending_option(void **state)
{
    hilock_options *o = new_options();

    (void)state;
    assert_int_equal(hilock_options_max_pending(o),
                     HILOCK_DEFAULT_MAX_PENDING);
    assert_int_equal(hilock_options_set_max_pending(o, 0), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_max_pending(
                         o, (int64_t)HILOCK_MAX_PENDING_LIMIT + 1),
                     HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_max_pending(NULL, 5), HILOCK_EINVAL);
    assert_int_equal(hilock_options_set_url(o, "redis://h?max_pending=5"),
                     HILOCK_OK);
    assert_int_equal(hilock_options_max_pending(o), 5);
    assert_int_equal(hilock_options_set_url(o, "redis://h?max_pending=0"),
                     HILOCK_EINVAL);
    assert_non_null(strstr(hilock_last_error(), "max_pending"));
    assert_int_equal(hilock_options_max_pending(o), 5);
    assert_string_equal(hilock_errname(HILOCK_EFULL), "EFULL");
    hilock_options_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_share_one_client),
        cmocka_unit_test(test_auto_pipelining),
        cmocka_unit_test(test_sync_from_threads),
        cmocka_unit_test(test_sync_more_threads_than_wake_bits),
        cmocka_unit_test(test_sync_from_threads_busy_poll),
        cmocka_unit_test(test_big_binary_value),
        cmocka_unit_test(test_reply_too_many_bytes),
        cmocka_unit_test(test_reply_too_many_elements),
        cmocka_unit_test(test_reply_bytes_across_elements),
        cmocka_unit_test(test_close_with_pending),
        cmocka_unit_test(test_close_with_unwritten),
        cmocka_unit_test(test_close_with_queued_tasks),
        cmocka_unit_test(test_destroy_in_callback_own_loop),
        cmocka_unit_test(test_destroy_in_callback_user_loop),
        cmocka_unit_test(test_noscript_fallback),
        cmocka_unit_test(test_noscript_keeps_order),
        cmocka_unit_test(test_max_pending_refuses_at_once),
        cmocka_unit_test(test_max_pending_option),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
