/* The event callback: connections up and down, the master that may have
 * changed when the server came back, and a lease lost with its reason,
 * each told once, on the loop thread, against a real redis-server that
 * is killed and restarted. */
/* ctest-timeout: 120 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/runtime.h"
#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

#define MAX_EVENTS 64

typedef struct seen_event {
    hilock_event_type type;
    char server[64];
    char detail[256];
    hilock_lock *lock;
    uint64_t owner;
    bool on_loop;
} seen_event;

typedef struct event_log {
    pthread_mutex_t mu;
    seen_event ev[MAX_EVENTS];
    atomic_int n;
} event_log;

static event_log events = {.mu = PTHREAD_MUTEX_INITIALIZER};
static hl_redis_server *server;

static void on_event(hilock_client *client, const hilock_event *e,
                     void *data)
{
    event_log *log = data;
    pthread_mutex_lock(&log->mu);
    int i = atomic_load(&log->n);
    if (i < MAX_EVENTS) {
        seen_event *s = &log->ev[i];
        s->type = e->type;
        snprintf(s->server, sizeof s->server, "%s",
                 e->server ? e->server : "");
        snprintf(s->detail, sizeof s->detail, "%s",
                 e->detail ? e->detail : "");
        s->lock = e->lock;
        s->owner = e->owner;
        s->on_loop = hl_client_in_loop(client);
        atomic_store(&log->n, i + 1);
    }
    pthread_mutex_unlock(&log->mu);
}

/* How many events of type were seen from index from on. */
static int count_of(hilock_event_type type, int from)
{
    int n = 0;
    pthread_mutex_lock(&events.mu);
    for (int i = from; i < atomic_load(&events.n); i++)
        n += events.ev[i].type == type;
    pthread_mutex_unlock(&events.mu);
    return n;
}

/* The first event of type at or after from; fails the test unless one
 * comes within timeout_ms. */
static seen_event expect_event(hilock_event_type type, int from,
                               int timeout_ms)
{
    int64_t until = hl_now_ms() + timeout_ms;
    for (;;) {
        pthread_mutex_lock(&events.mu);
        for (int i = from; i < atomic_load(&events.n); i++) {
            if (events.ev[i].type == type) {
                seen_event e = events.ev[i];
                pthread_mutex_unlock(&events.mu);
                return e;
            }
        }
        pthread_mutex_unlock(&events.mu);
        if (hl_now_ms() >= until)
            fail_msg("no \"%s\" event within %d ms", hilock_event_name(type),
                     timeout_ms);
        hl_sleep_ms(5);
    }
}

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

static hilock_client *client_with_events(void)
{
    hilock_options *o;
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_host(o, "127.0.0.1"), HILOCK_OK);
    assert_status(hilock_options_set_port(o, hl_redis_server_port(server)),
                  HILOCK_OK);
    assert_status(hilock_options_set_watchdog_timeout_ms(o, 600), HILOCK_OK);
    assert_status(hilock_options_set_event_callback(o, on_event, &events),
                  HILOCK_OK);
    hilock_client *c;
    assert_status(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

static void test_connections_and_a_lost_lease_are_told(void **state)
{
    (void)state;
    atomic_store(&events.n, 0);
    hilock_client *c = client_with_events();
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", hl_redis_server_port(server));
    /* Every command connection, each once. */
    seen_event up = expect_event(HILOCK_EVENT_CONNECTED, 0, hl_widen(5000));
    assert_string_equal(up.server, want);
    assert_true(up.on_loop);
    assert_int_equal(count_of(HILOCK_EVENT_CONNECTED, 0),
                     HILOCK_DEFAULT_CONNECTIONS);
    assert_int_equal(count_of(HILOCK_EVENT_DISCONNECTED, 0), 0);

    /* A lease whose key is deleted: told with the lock, owner and why. */
    hilock_lock *l;
    assert_status(hilock_lock_create(&l, c, "ev"), HILOCK_OK);
    assert_status(hilock_lock_acquire(l), HILOCK_OK);
    int mark = atomic_load(&events.n);
    char reply[64];
    assert_int_equal(hl_redis_server_cmd(server, reply, sizeof reply, "DEL",
                                         "ev", (char *)NULL),
                     ':');
    seen_event lost = expect_event(HILOCK_EVENT_LEASE_LOST, mark,
                                   hl_widen(3000));
    assert_ptr_equal(lost.lock, l);
    assert_int_equal(lost.owner, hilock_thread_owner());
    assert_non_null(strstr(lost.detail, "renewal found the lock"));
    assert_true(lost.on_loop);
    assert_status(hilock_lock_release(l), HILOCK_ELEASELOST);

    /* The server killed and started again: down, up, and the master that
     * may have changed (it came back empty). */
    mark = atomic_load(&events.n);
    hl_fixture_kill9(server);
    seen_event down = expect_event(HILOCK_EVENT_DISCONNECTED, mark,
                                   hl_widen(5000));
    assert_string_equal(down.server, want);
    assert_true(down.detail[0] != '\0');
    hl_fixture_restart(server);
    expect_event(HILOCK_EVENT_CONNECTED, mark, hl_widen(10000));
    seen_event changed = expect_event(HILOCK_EVENT_MASTER_CHANGED, mark,
                                      hl_widen(10000));
    assert_non_null(strstr(changed.detail, "came back"));
    assert_int_equal(count_of(HILOCK_EVENT_LEASE_LOST, mark), 0);
    hilock_lock_destroy(l);
    hilock_client_destroy(c);
}

static void test_event_names(void **state)
{
    (void)state;
    assert_string_equal(hilock_event_name(HILOCK_EVENT_CONNECTED),
                        "connected");
    assert_string_equal(hilock_event_name(HILOCK_EVENT_LEASE_LOST),
                        "lease lost");
    assert_string_equal(hilock_event_name((hilock_event_type)99), "unknown");
    assert_status(hilock_options_set_event_callback(NULL, on_event, NULL),
                  HILOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connections_and_a_lost_lease_are_told),
        cmocka_unit_test(test_event_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
