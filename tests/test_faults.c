/* What a client does when its server misbehaves: dies, restarts, stops
 * answering for a while, or drops the connection.  Each fault must end in
 * a status the contract names, exactly once per request, and in a client
 * that works again once the server does. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/transport/conn.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/loop_call.h"

/* ctest-timeout: 180 */

#define WAIT_MS 30000

static hilock_client *connect_with(const hl_redis_server *s,
                                   int64_t command_timeout_ms)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;

    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_int_equal(hilock_options_set_port(o, hl_redis_server_port(s)),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_command_timeout_ms(
                         o, command_timeout_ms),
                     HILOCK_OK);
    /* A short backoff ceiling keeps reconnects prompt once the server is
     * back, however long it was gone. */
    assert_int_equal(hilock_options_set_reconnect_backoff_ms(o, 20, 200),
                     HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

static bool is_connected(void *arg)
{
    return hilock_client_is_connected(arg) == 1;
}

static bool is_disconnected(void *arg)
{
    return hilock_client_is_connected(arg) == 0;
}

static int ping(hilock_client *c)
{
    const char *argv[] = { "PING" };
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 1, argv, NULL, &r);

    if (rc == HILOCK_OK &&
        (r == NULL || r->type != HILOCK_REPLY_STATUS ||
         strcmp(r->str, "PONG") != 0))
        rc = -1;
    hilock_reply_free(r);
    return rc;
}

static bool ping_succeeds(void *arg)
{
    return ping(arg) == HILOCK_OK;
}

static void read_conn_stats(hilock_client *c, void *arg)
{
    if (c->conn != NULL)
        *(hl_conn_stats *)arg = hl_conn_get_stats(c->conn);
}

/* Internal state belongs to the loop thread; read it there. */
static hl_conn_stats conn_stats(hilock_client *c)
{
    hl_conn_stats stats;

    memset(&stats, 0, sizeof stats);
    hl_run_on_loop_within(c, read_conn_stats, &stats, WAIT_MS);
    return stats;
}

/* Statuses seen by callbacks; bumped on the loop thread. */
struct tally {
    atomic_int total;
    atomic_int ok;
    atomic_int eio;
    atomic_int etimedout;
    atomic_int other;
    atomic_int other_status;
    atomic_int empty_detail;
    /* Replies to INCR on a fresh server, in arrival order. */
    long long values[64];
    int nvalues;
};

static void tally_init(struct tally *t)
{
    memset(t, 0, sizeof *t);
    atomic_init(&t->total, 0);
    atomic_init(&t->ok, 0);
    atomic_init(&t->eio, 0);
    atomic_init(&t->etimedout, 0);
    atomic_init(&t->other, 0);
    atomic_init(&t->other_status, 0);
    atomic_init(&t->empty_detail, 0);
}

static void tally_cb(hilock_client *c, int status, hilock_reply *r,
                     void *user)
{
    struct tally *t = user;

    (void)c;
    if (status != HILOCK_OK && hilock_last_error()[0] == '\0')
        atomic_fetch_add(&t->empty_detail, 1);
    if (status == HILOCK_OK && r != NULL &&
        r->type == HILOCK_REPLY_INTEGER && t->nvalues < 64)
        t->values[t->nvalues++] = r->integer;
    hilock_reply_free(r);
    if (status == HILOCK_OK) {
        atomic_fetch_add(&t->ok, 1);
    } else if (status == HILOCK_EIO) {
        atomic_fetch_add(&t->eio, 1);
    } else if (status == HILOCK_ETIMEDOUT) {
        atomic_fetch_add(&t->etimedout, 1);
    } else {
        atomic_store(&t->other_status, status);
        atomic_fetch_add(&t->other, 1);
    }
    atomic_fetch_add(&t->total, 1);
}

static void send_many(hilock_client *c, struct tally *t, int n,
                      const char *cmd)
{
    const char *argv[] = { cmd, "ctr" };

    for (int i = 0; i < n; i++)
        assert_int_equal(hilock_client_command_async(
                             c, strcmp(cmd, "PING") == 0 ? 1 : 2, argv,
                             NULL, tally_cb, t),
                         HILOCK_OK);
}

/* ---- 1: kill -9 and restart under a stream of requests -------------- */

struct producer {
    hilock_client *client;
    struct tally *tally;
    atomic_bool stop;
    int issued;
    int submit_failures;
};

static void *producer_main(void *arg)
{
    struct producer *p = arg;
    const char *argv[] = { "INCR", "ctr" };

    while (!atomic_load(&p->stop)) {
        if (hilock_client_command_async(p->client, 2, argv, NULL, tally_cb,
                                        p->tally) == HILOCK_OK)
            p->issued++;
        else
            p->submit_failures++;
        /* Pacing only: a steady stream, so that some requests are always
         * in flight when the server dies. */
        hl_sleep_ms(1);
    }
    return NULL;
}

static void test_restart_with_requests_in_flight(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_with(s, 2000);
    struct tally t;
    struct producer p;
    pthread_t tid;
    int ok_at_restart;

    (void)state;
    tally_init(&t);
    memset(&p, 0, sizeof p);
    p.client = c;
    p.tally = &t;
    atomic_init(&p.stop, false);
    assert_int_equal(pthread_create(&tid, NULL, producer_main, &p), 0);

    hl_expect_count(&t.ok, 50, WAIT_MS);
    hl_fixture_kill9(s);
    assert_true(hl_wait_until(is_disconnected, c, WAIT_MS));
    hl_fixture_restart(s);
    ok_at_restart = atomic_load(&t.ok);
    /* The stream goes on through the outage; fresh successes prove the
     * client found the new server by itself. */
    hl_expect_count(&t.ok, ok_at_restart + 50, WAIT_MS);
    assert_true(hl_wait_until(is_connected, c, WAIT_MS));

    atomic_store(&p.stop, true);
    pthread_join(tid, NULL);
    assert_int_equal(p.submit_failures, 0);
    hl_expect_count(&t.total, p.issued, WAIT_MS);
    print_message("%d requests: %d OK, %d EIO, %d ETIMEDOUT\n", p.issued,
                  atomic_load(&t.ok), atomic_load(&t.eio),
                  atomic_load(&t.etimedout));
    /* Replies are dispatched in order: after this one, a callback that
     * fired twice would already have been counted. */
    assert_int_equal(ping(c), HILOCK_OK);
    assert_int_equal(atomic_load(&t.total), p.issued);
    if (atomic_load(&t.other) != 0)
        fail_msg("%d callbacks got %s", atomic_load(&t.other),
                 hilock_errname(atomic_load(&t.other_status)));
    assert_int_equal(atomic_load(&t.empty_detail), 0);
    assert_int_equal(atomic_load(&t.ok) + atomic_load(&t.eio) +
                         atomic_load(&t.etimedout),
                     p.issued);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

static bool client_connected(void *arg)
{
    return hilock_client_is_connected(arg) == 1;
}

/* ---- 2: requests made while the server is down ---------------------- */

static void test_requests_while_down_survive_restart(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_with(s, 20000);
    struct tally t;

    (void)state;
    tally_init(&t);
    hl_fixture_kill9(s);
    /* Once the client knows, nothing it queues is written to the dead
     * socket; all of it must wait for the next connection. */
    assert_true(hl_wait_until(is_disconnected, c, WAIT_MS));
    send_many(c, &t, 20, "INCR");
    /* Not waiting for an event: holding the outage.  With the backoff
     * capped at 200 ms, 500 ms down means refused attempts while the
     * requests wait, and a refused attempt must not fail them. */
    hl_sleep_ms(500);
    assert_int_equal(atomic_load(&t.total), 0);
    hl_fixture_restart(s);
    hl_expect_count(&t.total, 20, WAIT_MS);
    assert_int_equal(atomic_load(&t.ok), 20);
    /* Each ran once, in order, on the restarted (empty) server. */
    assert_int_equal(t.nvalues, 20);
    for (int i = 0; i < 20; i++)
        assert_int_equal(t.values[i], i + 1);
    /* The other command connection comes back on its own schedule. */
    assert_true(hl_wait_until(client_connected, c, WAIT_MS));
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 3: the server stays down --------------------------------------- */

struct timed {
    int64_t issued_ms;
    atomic_int status;
    atomic_llong elapsed_ms;
    char detail[256];
    atomic_bool done;
};

static void timed_cb(hilock_client *c, int status, hilock_reply *r,
                     void *user)
{
    struct timed *tm = user;

    (void)c;
    hilock_reply_free(r);
    snprintf(tm->detail, sizeof tm->detail, "%s", hilock_last_error());
    atomic_store(&tm->elapsed_ms, hl_now_ms() - tm->issued_ms);
    atomic_store(&tm->status, status);
    atomic_store(&tm->done, true);
}

static void test_requests_time_out_while_down(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_with(s, 300);
    const char *argv[] = { "PING" };
    struct timed tm[5];

    (void)state;
    hl_fixture_kill9(s);
    assert_true(hl_wait_until(is_disconnected, c, WAIT_MS));
    for (int i = 0; i < 5; i++) {
        memset(&tm[i], 0, sizeof tm[i]);
        atomic_init(&tm[i].status, -1);
        atomic_init(&tm[i].elapsed_ms, 0);
        atomic_init(&tm[i].done, false);
        tm[i].issued_ms = hl_now_ms();
        assert_int_equal(hilock_client_command_async(c, 1, argv, NULL,
                                                     timed_cb, &tm[i]),
                         HILOCK_OK);
    }
    for (int i = 0; i < 5; i++) {
        assert_true(hl_wait_flag(&tm[i].done, WAIT_MS));
        assert_int_equal(atomic_load(&tm[i].status), HILOCK_ETIMEDOUT);
        assert_true(tm[i].detail[0] != '\0');
        /* Not before the timeout: the request may still have gone out
         * had the server come back.  (A little slack for timer
         * rounding.) */
        assert_true(atomic_load(&tm[i].elapsed_ms) >= 290);
    }

    /* The sync call says the same, with its detail on this thread. */
    assert_int_equal(ping(c), HILOCK_ETIMEDOUT);
    assert_true(hilock_last_error()[0] != '\0');
    assert_int_equal(hilock_client_is_connected(c), 0);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 4: a reply later than the command timeout ---------------------- */

static void test_slow_reply_times_out(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_with(s, 300);

    (void)state;
    assert_int_equal(ping(c), HILOCK_OK);
    hl_fixture_debug_sleep(s, 1.0);
    assert_int_equal(ping(c), HILOCK_ETIMEDOUT);
    assert_true(hilock_last_error()[0] != '\0');
    /* The late PONG of the dead connection must never be taken for the
     * answer to a later request; the retry loop sees only fresh ones. */
    assert_true(hl_wait_until(ping_succeeds, c, WAIT_MS));
    assert_true(hl_wait_until(is_connected, c, WAIT_MS));
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 5: the server drops the connection ----------------------------- */

static void test_client_kill_reconnects(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_with(s, 2000);
    hl_conn_stats before, after;

    (void)state;
    assert_int_equal(ping(c), HILOCK_OK);
    before = conn_stats(c);
    assert_int_equal(before.connects, 1);
    assert_true(hl_fixture_client_kill(s, "normal") >= 1);
    /* A request racing the close may get EIO; the next ones must not. */
    assert_true(hl_wait_until(ping_succeeds, c, WAIT_MS));
    after = conn_stats(c);
    assert_true(after.connects > before.connects);
    /* Every command connection was killed; each comes back on its own. */
    assert_true(hl_wait_until(client_connected, c, WAIT_MS));
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

/* ---- 6: the server stops (SIGSTOP) and continues -------------------- */

static void test_paused_server(void **state)
{
    hl_redis_server *s = hl_fixture_plain();
    hilock_client *c = connect_with(s, 300);
    struct tally t;

    (void)state;
    tally_init(&t);
    assert_int_equal(ping(c), HILOCK_OK);
    hl_fixture_pause(s);
    send_many(c, &t, 10, "PING");
    hl_expect_count(&t.total, 10, WAIT_MS);
    assert_int_equal(atomic_load(&t.etimedout), 10);
    assert_int_equal(atomic_load(&t.empty_detail), 0);

    /* Still stopped: a request made now cannot succeed either, whether
     * it is written or waits for a connection that never gets ready. */
    assert_int_equal(ping(c), HILOCK_ETIMEDOUT);

    hl_fixture_resume(s);
    assert_true(hl_wait_until(ping_succeeds, c, WAIT_MS));
    assert_true(hl_wait_until(is_connected, c, WAIT_MS));
    assert_int_equal(atomic_load(&t.total), 10);
    hilock_client_destroy(c);
    hl_redis_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_with_requests_in_flight),
        cmocka_unit_test(test_requests_while_down_survive_restart),
        cmocka_unit_test(test_requests_time_out_while_down),
        cmocka_unit_test(test_slow_reply_times_out),
        cmocka_unit_test(test_client_kill_reconnects),
        cmocka_unit_test(test_paused_server),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
