/* A command queued to go last (hl_conn_command_last): it reaches the
 * server behind every request queued before the connection writes, even
 * those queued after it; a second one turns the first into an ordinary
 * request in its place; and while the connection is down it times out
 * and is failed on close like any request not yet written. */
/* ctest-timeout: 60 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <ev.h>

#include "core/transport/conn.h"
#include "hilock/error.h"
#include "hilock/options.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

static hl_redis_server *server;

static int setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    return server ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    return 0;
}

typedef struct answer {
    int calls;
    int status;
    char value[32];
} answer;

static int answered; /* answers of the case running, all requests */

static void on_answer(void *data, int status, hilock_reply *reply)
{
    answer *a = data;
    a->calls++;
    a->status = status;
    if (reply && reply->type == HILOCK_REPLY_STRING)
        snprintf(a->value, sizeof a->value, "%.*s", (int)reply->len,
                 reply->str);
    hilock_reply_free(reply);
    answered++;
}

static void on_event(hl_conn *conn, hl_conn_event ev, int status,
                     const char *detail, hilock_reply *reply, void *data)
{
    (void)conn, (void)ev, (void)status, (void)detail, (void)data;
    hilock_reply_free(reply);
}

static hilock_options *options_for(int port, int64_t command_ms)
{
    hilock_options *o = NULL;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_status(hilock_options_set_port(o, port), HILOCK_OK);
    assert_status(hilock_options_set_command_timeout_ms(o, command_ms),
                  HILOCK_OK);
    assert_status(hilock_options_set_reconnect_backoff_ms(o, 1, 5),
                  HILOCK_OK);
    return o;
}

static bool run_until_answered(struct ev_loop *loop, int want, int ms)
{
    int64_t deadline = hl_now_ms() + ms;
    while (answered < want && hl_now_ms() < deadline)
        ev_run(loop, EVRUN_ONCE);
    return answered >= want;
}

static void command(hl_conn *c, bool last, answer *a, const char *verb,
                    const char *value)
{
    const char *argv[] = {verb, "conn-last", value};
    size_t lens[] = {strlen(verb), 9, value ? strlen(value) : 0};
    int argc = value ? 3 : 2;
    int rc = last ? hl_conn_command_last(c, argc, argv, lens, on_answer, a)
                  : hl_conn_command(c, argc, argv, lens, on_answer, a);
    assert_status(rc, HILOCK_OK);
}

/* Queued in one iteration: GET last, SET 1, GET last, SET 2.  The wire
 * order is SET 1, GET, SET 2, GET: the first GET went in its place when
 * the second was queued, and the second went behind everything. */
static void test_last_goes_behind_later_requests(void **state)
{
    (void)state;
    hilock_options *o = options_for(hl_redis_server_port(server), 5000);
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    hl_conn_config cfg = {.loop = loop, .opts = o, .on_event = on_event};
    hl_conn *c = hl_conn_create(&cfg);
    assert_non_null(c);
    answered = 0;
    answer first = {0}, set1 = {0}, second = {0}, set2 = {0};
    command(c, true, &first, "GET", NULL);
    assert_true(hl_conn_last_is(c, on_answer, &first));
    command(c, false, &set1, "SET", "1");
    assert_true(hl_conn_last_is(c, on_answer, &first));
    command(c, true, &second, "GET", NULL);
    assert_false(hl_conn_last_is(c, on_answer, &first));
    assert_true(hl_conn_last_is(c, on_answer, &second));
    command(c, false, &set2, "SET", "2");
    assert_true(run_until_answered(loop, 4, hl_widen(5000)));
    assert_int_equal(first.status, HILOCK_OK);
    assert_string_equal(first.value, "1");
    assert_int_equal(second.status, HILOCK_OK);
    assert_string_equal(second.value, "2");
    /* Written: nothing waits to go last any more. */
    assert_false(hl_conn_last_is(c, on_answer, &second));
    assert_false(hl_conn_busy(c));
    hl_conn_free(c);
    ev_loop_destroy(loop);
    hilock_options_free(o);
}

/* With no server, the command waiting to go last times out as a pending
 * request does, exactly once; and one still waiting when the connection
 * closes is failed with the rest. */
static void test_last_times_out_and_closes(void **state)
{
    (void)state;
    int fd;
    int port = hl_refusing_port(&fd);
    hilock_options *o = options_for(port, 300);
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    hl_conn_config cfg = {.loop = loop, .opts = o, .on_event = on_event};
    hl_conn *c = hl_conn_create(&cfg);
    assert_non_null(c);
    answered = 0;
    answer set = {0}, last = {0};
    command(c, false, &set, "SET", "x");
    command(c, true, &last, "GET", NULL);
    assert_true(hl_conn_busy(c));
    assert_true(run_until_answered(loop, 2, hl_widen(5000)));
    assert_int_equal(set.status, HILOCK_ETIMEDOUT);
    assert_int_equal(last.calls, 1);
    assert_int_equal(last.status, HILOCK_ETIMEDOUT);
    assert_false(hl_conn_last_is(c, on_answer, &last));
    assert_false(hl_conn_busy(c));

    answer closed = {0};
    command(c, true, &closed, "GET", NULL);
    hl_conn_free(c);
    assert_int_equal(closed.calls, 1);
    assert_int_equal(closed.status, HILOCK_ECLOSED);
    ev_loop_destroy(loop);
    hilock_options_free(o);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_goes_behind_later_requests),
        cmocka_unit_test(test_last_times_out_and_closes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
