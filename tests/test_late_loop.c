/* A loop that runs late (its process stopped, starved of the CPU, or a
 * caller's loop not run for a while) wakes up to both an answer that
 * came while it slept and a deadline that passed meanwhile.  The answer
 * is read first: what the server said is not thrown away because the
 * clock moved on.  Each case holds the answer back with CLIENT PAUSE
 * until after the request was written, then lets its deadline pass
 * without running the loop, with the answer waiting in the socket. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"

static hl_redis_server *server;

static int setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    return 0;
}

/* A client on a loop only this thread runs, when it chooses. */
static hilock_client *client_on(struct ev_loop *loop, int64_t command_ms,
                                int64_t watchdog_ms)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;

    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_int_equal(hilock_options_set_port(o, hl_redis_server_port(server)),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_loop(o, loop), HILOCK_OK);
    assert_int_equal(hilock_options_set_command_timeout_ms(o, command_ms),
                     HILOCK_OK);
    if (watchdog_ms > 0)
        assert_int_equal(hilock_options_set_watchdog_timeout_ms(o,
                                                                watchdog_ms),
                         HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

/* One turn of the loop that waits at most 10 ms for something to do. */
static void turn(struct ev_loop *loop)
{
    ev_timer tick;

    ev_timer_init(&tick, on_tick, 0.01, 0.0);
    ev_timer_start(loop, &tick);
    ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &tick);
}

/* Turn the loop until *flag is set, for at most timeout_ms. */
static bool turn_until(struct ev_loop *loop, const bool *flag, int timeout_ms)
{
    int64_t end = hl_now_ms() + timeout_ms;

    while (!*flag && hl_now_ms() < end)
        turn(loop);
    return *flag;
}

static void pause_server(int ms)
{
    char reply[64], arg[24];

    snprintf(arg, sizeof arg, "%d", ms);
    assert_int_equal(hl_redis_server_cmd(server, reply, sizeof reply,
                                         "CLIENT", "PAUSE", arg, "ALL",
                                         (char *)NULL),
                     '+');
}

/* Let the wall clock pass until, without running any loop: the stall. */
static void stall_until(int64_t until_ms)
{
    int64_t now;

    while ((now = hl_now_ms()) < until_ms)
        hl_sleep_ms((int)(until_ms - now));
}

struct answer {
    bool done;
    int status;
    char detail[256];
    char str[16];
};

static void on_answer(hilock_client *c, int status, hilock_reply *reply,
                      void *user_data)
{
    struct answer *a = user_data;

    (void)c;
    a->done = true;
    a->status = status;
    snprintf(a->detail, sizeof a->detail, "%s",
             status == HILOCK_OK ? "" : hilock_last_error());
    if (reply != NULL && reply->str != NULL)
        snprintf(a->str, sizeof a->str, "%.*s", (int)reply->len, reply->str);
    hilock_reply_free(reply);
}

/* A command answered before its timeout, read after it: the answer, not
 * a timeout and a connection reset. */
static void test_command_answered_in_time_but_read_late(void **state)
{
    const int timeout_ms = hl_widen(600), pause_ms = hl_widen(200);
    const char *ping[] = {"PING"};
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct answer first = {0}, a = {0};
    hilock_client *c;
    int64_t sent;

    (void)state;
    assert_non_null(loop);
    c = client_on(loop, timeout_ms, 0);
    /* Connected and answering first, so that the PING below is written
     * in the turn right after it is asked. */
    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                 on_answer, &first),
                     HILOCK_OK);
    if (!turn_until(loop, &first.done, hl_widen(10000)))
        fail_msg("the client never answered a first PING");
    assert_int_equal(first.status, HILOCK_OK);

    pause_server(pause_ms);
    sent = hl_now_ms();
    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                 on_answer, &a),
                     HILOCK_OK);
    /* One turn writes it; the paused server keeps its answer until
     * pause_ms after the pause began. */
    ev_run(loop, EVRUN_NOWAIT);
    if (a.done)
        fail_msg("answered within the pause (%s): the server did not "
                 "pause", hilock_errname(a.status));
    if (hl_now_ms() - sent >= pause_ms)
        fail_msg("the PING left %lld ms after the pause began, past its "
                 "end: nothing here tells a late loop",
                 (long long)(hl_now_ms() - sent));
    /* The answer comes at pause_ms, well within the timeout; the loop
     * next runs after the timeout. */
    stall_until(sent + timeout_ms + 200);
    if (!turn_until(loop, &a.done, hl_widen(5000)))
        fail_msg("no answer after the loop ran again");
    if (a.status != HILOCK_OK)
        fail_msg("the PING answered in time and read late ended with %s "
                 "(%s)", hilock_errname(a.status), a.detail);
    assert_string_equal(a.str, "PONG");
    hilock_client_destroy(c);
    ev_run(loop, EVRUN_NOWAIT);
    ev_loop_destroy(loop);
}

struct took {
    bool done;
    int status;
};

static void on_acquired(hilock_lock *lock, int status,
                        const hilock_acquired *acquired, void *user_data)
{
    struct took *t = user_data;

    (void)lock;
    (void)acquired;
    t->done = true;
    t->status = status;
}

static uint64_t renew_calls(hilock_client *c, uint64_t *renewed)
{
    hilock_stats st;

    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    assert_int_equal(hilock_client_stats_read(c, &st), HILOCK_OK);
    *renewed = st.counters.leases_renewed;
    return st.counters.renew_calls;
}

/* A watchdog renewal the server ran and answered before the lease's old
 * deadline, read only after that deadline: the lease stands, as the
 * server has it, and is not reported lost. */
static void test_renewal_answered_in_time_but_read_late(void **state)
{
    const int64_t watchdog_ms = hl_scaled(3000, 9000);
    const int pause_ms = (int)(2 * watchdog_ms / 3);
    const uint64_t owner = 7;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct took t = {0};
    hilock_client *c;
    hilock_lock *l;
    uint64_t renewed = 0;
    int64_t granted, renewal_sent, pttl;
    bool lost = true;
    char reply[64];

    (void)state;
    assert_non_null(loop);
    c = client_on(loop, 10000, watchdog_ms);
    assert_int_equal(hilock_lock_create(&l, c, "late-renewal"), HILOCK_OK);
    assert_int_equal(hilock_lock_acquire_async(l, owner, 0,
                                               HILOCK_LEASE_WATCHDOG, 0,
                                               on_acquired, &t, NULL),
                     HILOCK_OK);
    if (!turn_until(loop, &t.done, hl_widen(10000)))
        fail_msg("the acquire never ended");
    assert_int_equal(t.status, HILOCK_OK);
    granted = hl_now_ms();

    /* The renewal is due a third of the lease after the grant; the pause
     * holds its answer until well after that and well before the grant's
     * lease runs out. */
    pause_server(pause_ms);
    while (renew_calls(c, &renewed) == 0) {
        if (hl_now_ms() - granted >= pause_ms)
            fail_msg("no renewal was sent within %d ms of the grant",
                     pause_ms);
        turn(loop);
    }
    ev_run(loop, EVRUN_NOWAIT); /* written */
    renewal_sent = hl_now_ms();
    renew_calls(c, &renewed);
    if (renewed != 0)
        fail_msg("the renewal was answered while the server was paused");
    if (renewal_sent - granted >= pause_ms)
        fail_msg("the renewal left %lld ms after the grant, past the "
                 "pause: nothing here tells a late loop",
                 (long long)(renewal_sent - granted));

    /* The answer comes at the pause's end; the loop next runs after the
     * grant's own lease would have run out. */
    stall_until(granted + watchdog_ms + 200);
    for (int i = 0; i < 3; i++)
        ev_run(loop, EVRUN_NOWAIT);
    assert_int_equal(hilock_lock_owner_lost_get(l, owner, &lost), HILOCK_OK);
    renew_calls(c, &renewed);
    if (lost)
        fail_msg("the lease was reported lost though its renewal was "
                 "answered in time (renewals confirmed: %llu)",
                 (unsigned long long)renewed);
    assert_true(renewed >= 1);
    /* As the server has it: still held, for a lease from the renewal. */
    assert_int_equal(hl_redis_server_cmd(server, reply, sizeof reply, "PTTL",
                                         "late-renewal", (char *)NULL),
                     ':');
    pttl = strtoll(reply + 1, NULL, 10);
    if (pttl <= 0)
        fail_msg("the server holds the lock no longer (PTTL %lld)",
                 (long long)pttl);

    hilock_lock_destroy(l);
    hilock_client_destroy(c);
    ev_run(loop, EVRUN_NOWAIT);
    ev_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_command_answered_in_time_but_read_late, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_renewal_answered_in_time_but_read_late, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
