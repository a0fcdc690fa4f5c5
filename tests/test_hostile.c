/* What a hostile server can and cannot do to a client: a ttl no lease
 * has, an uptime no server has, a line that never ends, a pub/sub
 * connection that stops answering.  The server is the fake of
 * support/hostile_server.h; each test scripts its answers, counts the
 * requests that reach it, and waits on events with a deadline. */
/* ctest-timeout: 240 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "core/config/option_values.h"
#include "multi/multi_internal.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/hostile_server.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"

#define FILLER_BYTES ((size_t)100 * 1024 * 1024)

/* The answers of one test.  Set before the server starts, read by its
 * connection threads. */
typedef struct script {
    const char *acquire_reply; /* bytes answering EVALSHA and EVAL */
    const char *then_reply;    /* ... but the first, when set */
    atomic_int scripts_seen;
    const char *uptime;        /* INFO's uptime_in_seconds */
    const char *endless_type;  /* answer GET with this, then no line end */
    bool endless_on_subscribe; /* the same after confirming a SUBSCRIBE */
    bool swallow_pubsub_ping;  /* never answer PING on pub/sub */
    atomic_long filler_sent;
    atomic_bool filler_done;
} script;

static bool answer(hl_hostile_conn *conn, const hl_hostile_req *req,
                   void *data)
{
    script *s = data;
    if (s->acquire_reply &&
        (hl_hostile_is(req, "EVALSHA") || hl_hostile_is(req, "EVAL"))) {
        const char *r = atomic_fetch_add(&s->scripts_seen, 1) > 0 &&
                                s->then_reply
                            ? s->then_reply
                            : s->acquire_reply;
        hl_hostile_send(conn, r, strlen(r));
        return true;
    }
    if (s->uptime && hl_hostile_is(req, "INFO")) {
        char text[256];
        int n = snprintf(text, sizeof text,
                         "# Server\r\nrun_id:%040d\r\nuptime_in_seconds:%s"
                         "\r\n",
                         7, s->uptime);
        hl_hostile_sendf(conn, "$%d\r\n%s\r\n", n, text);
        return true;
    }
    if (s->endless_type && hl_hostile_is(req, "GET")) {
        hl_hostile_send(conn, s->endless_type, strlen(s->endless_type));
        atomic_store(&s->filler_sent,
                     (long)hl_hostile_send_filler(conn, FILLER_BYTES));
        atomic_store(&s->filler_done, true);
        return true;
    }
    if (s->endless_on_subscribe && hl_hostile_is(req, "SUBSCRIBE") &&
        !atomic_load(&s->filler_done)) {
        hl_hostile_sendf(conn, "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:1\r\n",
                         req->lens[1], req->argv[1]);
        hl_hostile_send(conn, "+", 1);
        atomic_store(&s->filler_sent,
                     (long)hl_hostile_send_filler(conn, FILLER_BYTES));
        atomic_store(&s->filler_done, true);
        return true;
    }
    if (s->swallow_pubsub_ping && hl_hostile_is(req, "PING") &&
        hl_hostile_subscribed(conn))
        return true;
    return false;
}

static void script_init(script *s)
{
    memset(s, 0, sizeof *s);
    atomic_init(&s->filler_sent, 0);
    atomic_init(&s->scripts_seen, 0);
    atomic_init(&s->filler_done, false);
}

typedef struct client_setup {
    int64_t command_timeout_ms;
    int64_t watchdog_ms;
    int64_t quarantine_ms;
    int connections; /* 0: the default */
    bool no_replica_ack; /* replicas=none: no WAIT after a write */
} client_setup;

static hilock_client *client_of(hl_hostile *h, const client_setup *cs)
{
    hilock_options *o = NULL;
    hilock_client *c = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_status(hilock_options_set_port(o, hl_hostile_port(h)), HILOCK_OK);
    assert_status(hilock_options_set_reconnect_backoff_ms(o, 20, 200),
                  HILOCK_OK);
    assert_status(hl_set_valgrind_timeouts(o), HILOCK_OK);
    if (cs && cs->command_timeout_ms > 0)
        assert_status(hilock_options_set_command_timeout_ms(
                          o, hl_widen((int)cs->command_timeout_ms)),
                      HILOCK_OK);
    if (cs && cs->watchdog_ms > 0)
        assert_status(hilock_options_set_watchdog_timeout_ms(o,
                                                             cs->watchdog_ms),
                      HILOCK_OK);
    if (cs && cs->no_replica_ack)
        assert_status(hilock_options_set_replica_ack(o, HILOCK_ACK_NONE),
                      HILOCK_OK);
    if (cs && cs->connections > 0)
        assert_status(hilock_options_set_connections(o, cs->connections),
                      HILOCK_OK);
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    assert_status(rc, HILOCK_OK);
    return c;
}

/* ---- what "held, ttl X" may cost ------------------------------------ */

static long acquire_requests(hl_hostile *h)
{
    return hl_hostile_count(h, "EVALSHA") + hl_hostile_count(h, "EVAL");
}

/* Every kind reads the same {0, ttl} reply; a ttl no real server gives
 * must neither overflow nor make the client retry at the speed of the
 * network.  A 1.5 s wait takes one attempt, the retry floor's doublings
 * (5, 10, 20, ... 640 ms) and a last attempt at the deadline: about ten
 * requests (a fair lock adds the one that gives its place back), where
 * a retry storm sends tens of thousands. */
static void expect_held_without_storm(const char *ttl, hilock_lock *(*make)(
                                                           hilock_client *,
                                                           const char *))
{
    script s;
    script_init(&s);
    char reply[64];
    snprintf(reply, sizeof reply, "*2\r\n:0\r\n:%s\r\n", ttl);
    s.acquire_reply = reply;
    hl_hostile *h = hl_hostile_start(answer, &s);
    hilock_client *c = client_of(h, NULL);
    hilock_lock *l = make(c, "hostile");
    int64_t t0 = hl_now_ms();
    assert_status(hilock_lock_try_acquire(l, 1500, 10000), HILOCK_EBUSY);
    int64_t took = hl_now_ms() - t0;
    long sent = acquire_requests(h);
    if (sent > 15)
        fail_msg("ttl %s: %ld acquire requests in a 1.5 s wait", ttl, sent);
    assert_true(sent >= 1);
    /* The wait was the caller's: neither cut short nor stretched. */
    assert_true(took >= 1400);
    assert_true(took < hl_widen(4000));
    hl_free_lock(l);
    hl_free_client(c);
    hl_hostile_stop(h);
}

static void test_ttl_int64_max_is_no_storm(void **state)
{
    (void)state;
    expect_held_without_storm("9223372036854775807", hl_new_lock);
}

static void test_ttl_zero_is_no_storm(void **state)
{
    (void)state;
    expect_held_without_storm("0", hl_new_lock);
}

static void test_ttl_negative_is_no_storm(void **state)
{
    (void)state;
    expect_held_without_storm("-1", hl_new_lock);
    expect_held_without_storm("-9223372036854775808", hl_new_lock);
}

/* The fair lock and the read-write lock wait the same way, with a
 * heartbeat that renews their place (a third of the waiter timeout, 5 s
 * by default: no extra attempt in 1.5 s). */
static void test_ttl_extremes_other_kinds(void **state)
{
    (void)state;
    expect_held_without_storm("0", hl_new_fair_lock);
    expect_held_without_storm("9223372036854775807", hl_new_fair_lock);
    expect_held_without_storm("0", hl_new_write_lock);
    expect_held_without_storm("9223372036854775807", hl_new_read_lock);
}

/* ---- a call sent back for the full form ----------------------------- */

/* A reentrant lock's lean attempt answered 0 is made again in the full
 * form, and a lean release answered HL_RELEASE_FULL_FORM too; the same
 * answer to the full form is no answer of it, and the call ends with
 * HILOCK_EPROTO after those two requests rather than go round. */
static void test_sent_back_for_ever_is_no_loop(void **state)
{
    (void)state;
    script s;
    script_init(&s);
    s.acquire_reply = ":0\r\n";
    hl_hostile *h = hl_hostile_start(answer, &s);
    hilock_client *c = client_of(h, NULL);
    hilock_lock *l = hl_new_lock(c, "hostile");
    assert_status(hilock_lock_try_acquire(l, 0, 10000), HILOCK_EPROTO);
    assert_int_equal(acquire_requests(h), 2);
    hl_free_lock(l);
    hl_free_client(c);
    hl_hostile_stop(h);

    /* Granted by the lean form, then every release sent back. */
    script_init(&s);
    s.acquire_reply = ":1\r\n";
    s.then_reply = ":-6\r\n";
    h = hl_hostile_start(answer, &s);
    const client_setup plain = {.no_replica_ack = true};
    c = client_of(h, &plain);
    l = hl_new_lock(c, "hostile");
    assert_status(hilock_lock_try_acquire(l, 0, 10000), HILOCK_OK);
    assert_int_equal(acquire_requests(h), 1);
    assert_status(hilock_lock_release(l), HILOCK_EPROTO);
    assert_int_equal(acquire_requests(h), 3);
    hl_free_lock(l);
    hl_free_client(c);
    hl_hostile_stop(h);
}

/* ---- a RedLock master's uptime ------------------------------------- */

typedef struct watched {
    hl_restart_watch *watch;
    int64_t quarantine_ms;
} watched;

/* What a RedLock does for each master, on a client that is already up:
 * the watch hears of connections that come up after it, so each one is
 * dropped to come up again. */
static void watch_and_reconnect(hilock_client *c, void *arg)
{
    watched *w = arg;
    assert_status(hl_restart_watch_attach(&w->watch, c, w->quarantine_ms),
                  HILOCK_OK);
    for (int i = 0; i < c->nconns; i++)
        hl_conn_reset(c->conns[i], HILOCK_EIO, "to come up watched");
}

static bool watch_settled(void *arg)
{
    return hl_restart_watch_settled(((watched *)arg)->watch);
}

typedef struct uptime_case {
    const char *uptime;
    bool quarantined; /* up for less than the quarantine: no vote yet */
} uptime_case;

static void test_restart_check_takes_any_uptime(void **state)
{
    (void)state;
    static const uptime_case cases[] = {
        {"9223372036854775807", false},
        {"-9223372036854775808", true},
        {"1000000000000000000000000000000", false},
        {"-9223372036854775", true},
        {"9223372036854775", false},
        {"-1", true},
        {"0", true},
        {"59", true},
        {"61", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        script s;
        script_init(&s);
        s.uptime = cases[i].uptime;
        hl_hostile *h = hl_hostile_start(answer, &s);
        client_setup cs = {.connections = 1};
        hilock_client *c = client_of(h, &cs);
        watched w = {NULL, 60000};
        hl_run_on_loop(c, watch_and_reconnect, &w);
        if (!hl_wait_until(watch_settled, &w, hl_widen(10000)))
            fail_msg("uptime %s: no INFO answer", cases[i].uptime);
        bool q = hl_restart_quarantined(c);
        if (q != cases[i].quarantined)
            fail_msg("uptime %s: quarantined %d, expected %d",
                     cases[i].uptime, q, cases[i].quarantined);
        assert_true(hl_hostile_count(h, "INFO") >= 1);
        hl_free_client(c);
        hl_restart_watch_free(w.watch);
        hl_hostile_stop(h);
    }
}

/* ---- a line that never ends ----------------------------------------- */

static bool filler_done(void *arg)
{
    return atomic_load(&((script *)arg)->filler_done);
}

/* A reply line of any type with no end: refused once it passes the line
 * bound, long before the command timeout, and without reading the
 * 100 MB the server would send. */
static void test_endless_line_is_too_big(void **state)
{
    (void)state;
    static const char *types[] = {"-ERR ", "+", ":", "$", "*"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        script s;
        script_init(&s);
        s.endless_type = types[i];
        hl_hostile *h = hl_hostile_start(answer, &s);
        client_setup cs = {.command_timeout_ms = 10000};
        hilock_client *c = client_of(h, &cs);
        const char *argv[] = {"GET", "k"};
        hilock_reply *reply = NULL;
        int64_t t0 = hl_now_ms();
        int rc = hilock_client_command(c, 2, argv, NULL, &reply);
        int64_t took = hl_now_ms() - t0;
        if (rc != HILOCK_ETOOBIG || took > hl_widen(2000))
            fail_msg("'%s' then no line end: %s after %lld ms (%s)",
                     types[i], hilock_errname(rc), (long long)took,
                     hilock_last_error());
        assert_null(reply);
        /* The client hung up: the server could not write it all. */
        if (!hl_wait_until(filler_done, &s, hl_widen(5000)))
            fail_msg("the client still reads the endless line");
        assert_true((size_t)atomic_load(&s.filler_sent) < FILLER_BYTES);
        /* And it still serves. */
        const char *ping[] = {"PING"};
        assert_status(hilock_client_command(c, 1, ping, NULL, &reply),
                      HILOCK_OK);
        hilock_reply_free(reply);
        hl_free_client(c);
        hl_hostile_stop(h);
    }
}

/* A client of h with one acquire waiting on a lock it is told is held
 * for 100 s: its pub/sub connection is what the next tests look at. */
typedef struct waiting {
    hl_hostile *h;
    hilock_client *c;
    hilock_lock *l;
    hl_acquire_rec rec;
} waiting;

static void waiting_start(waiting *w, script *s, const client_setup *cs)
{
    s->acquire_reply = "*2\r\n:0\r\n:100000\r\n";
    w->h = hl_hostile_start(answer, s);
    w->c = client_of(w->h, cs);
    w->l = hl_new_lock(w->c, "hostile");
    hl_acquire_rec_init(&w->rec, w->c);
    assert_status(hilock_lock_acquire_async(w->l, 1, 60000, 0, 0,
                                            hl_record_acquire, &w->rec,
                                            &w->rec.id),
                  HILOCK_OK);
}

/* The acquire was still waiting: it ends only when cancelled. */
static void waiting_end(waiting *w)
{
    assert_int_equal(atomic_load(&w->rec.calls), 0);
    assert_status(hilock_lock_cancel(w->l, w->rec.id), HILOCK_OK);
    assert_status(hl_expect_acquire(&w->rec), HILOCK_ECANCELED);
    hl_free_lock(w->l);
    hl_free_client(w->c);
    hl_hostile_stop(w->h);
}

/* The pub/sub connection has no request to time out; an endless line
 * there is refused by the same bound, and the command connections stay
 * quick meanwhile. */
static void test_endless_line_on_pubsub(void **state)
{
    (void)state;
    script s;
    script_init(&s);
    s.endless_on_subscribe = true;
    static waiting w;
    waiting_start(&w, &s, NULL);
    if (!hl_wait_until(filler_done, &s, hl_widen(5000)))
        fail_msg("the pub/sub connection still reads the endless line");
    assert_true((size_t)atomic_load(&s.filler_sent) < FILLER_BYTES);
    const char *ping[] = {"PING"};
    hilock_reply *reply = NULL;
    int64_t t0 = hl_now_ms();
    assert_status(hilock_client_command(w.c, 1, ping, NULL, &reply),
                  HILOCK_OK);
    assert_true(hl_now_ms() - t0 < hl_widen(500));
    hilock_reply_free(reply);
    /* The waiter waits on: a reconnected pub/sub serves it again. */
    waiting_end(&w);
}

/* ---- a pub/sub connection that stops answering ----------------------- */

static bool resubscribed(void *arg)
{
    return hl_hostile_count(arg, "SUBSCRIBE") >= 2;
}

/* A server that keeps the pub/sub socket open but answers nothing on it
 * would leave waiters to their timers for good.  The client pings a quiet
 * pub/sub connection and replaces it when the PING goes unanswered for
 * the command timeout; the channel is subscribed again. */
static void test_silent_pubsub_is_replaced(void **state)
{
    (void)state;
    script s;
    script_init(&s);
    s.swallow_pubsub_ping = true;
    client_setup cs = {.command_timeout_ms = 300, .watchdog_ms = 600};
    static waiting w;
    waiting_start(&w, &s, &cs);
    if (!hl_wait_until(resubscribed, w.h, hl_widen(5000)))
        fail_msg("the silent pub/sub connection was kept: %ld SUBSCRIBE, "
                 "%ld PING",
                 hl_hostile_count(w.h, "SUBSCRIBE"),
                 hl_hostile_count(w.h, "PING"));
    waiting_end(&w);
}

static bool pinged_thrice(void *arg)
{
    /* Past the handshake's PING of each of the three connections. */
    return hl_hostile_count(arg, "PING") >= 6;
}

/* A quiet pub/sub connection whose PING is answered is kept: the check
 * replaces only a connection that stopped answering. */
static void test_answered_ping_keeps_pubsub(void **state)
{
    (void)state;
    script s;
    script_init(&s);
    client_setup cs = {.command_timeout_ms = 300, .watchdog_ms = 600};
    static waiting w;
    waiting_start(&w, &s, &cs);
    if (!hl_wait_until(pinged_thrice, w.h, hl_widen(5000)))
        fail_msg("a quiet pub/sub connection was not checked: %ld PING",
                 hl_hostile_count(w.h, "PING"));
    /* Two command connections and one pub/sub, none replaced. */
    assert_int_equal(hl_hostile_connections(w.h), 3);
    assert_int_equal(hl_hostile_count(w.h, "SUBSCRIBE"), 1);
    waiting_end(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ttl_int64_max_is_no_storm),
        cmocka_unit_test(test_ttl_zero_is_no_storm),
        cmocka_unit_test(test_ttl_negative_is_no_storm),
        cmocka_unit_test(test_ttl_extremes_other_kinds),
        cmocka_unit_test(test_sent_back_for_ever_is_no_loop),
        cmocka_unit_test(test_restart_check_takes_any_uptime),
        cmocka_unit_test(test_endless_line_is_too_big),
        cmocka_unit_test(test_endless_line_on_pubsub),
        cmocka_unit_test(test_silent_pubsub_is_replaced),
        cmocka_unit_test(test_answered_ping_keeps_pubsub),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
