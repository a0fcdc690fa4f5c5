/* How hilock_redlock_create waits for its masters: until every master has
 * connected or failed its first attempt, at most the connect timeout, and
 * asleep meanwhile.  Whether the calling thread slept is read from its
 * voluntary context switches: a thread that polls gives up the CPU at
 * every poll, one that waits on an event gives it up a handful of times.
 * A stopped master (SIGSTOP) accepts the connection in the kernel and
 * never answers, so its first attempt lasts the whole connect timeout. */
/* ctest-timeout: 120 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

#define NMASTERS 3

/* An event-driven create blocks to start its thread, to wait for it, and
 * to wait for the masters, plus the odd contended mutex; a create that
 * polls every millisecond passes this within its first 50 ms. */
#define MAX_SWITCHES 40

static hl_redis_server *masters[NMASTERS];

static int setup(void **state)
{
    (void)state;
    hl_fixture_masters(masters, NMASTERS);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    hl_fixture_stop_masters(masters, NMASTERS);
    return 0;
}

static long voluntary_switches(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        fail_msg("getrusage failed");
    return ru.ru_nvcsw;
}

typedef struct create_result {
    int status;
    hilock_redlock *rl;
    int64_t took_ms;
    long switches;
} create_result;

static create_result create(int64_t connect_ms)
{
    char buf[NMASTERS][64];
    const char *urls[NMASTERS];
    hilock_options *o = NULL;
    create_result r = {0};

    for (int i = 0; i < NMASTERS; i++) {
        snprintf(buf[i], sizeof buf[i], "redis://127.0.0.1:%d",
                 hl_redis_server_port(masters[i]));
        urls[i] = buf[i];
    }
    assert_status(hilock_options_create(&o), HILOCK_OK);
    assert_status(hilock_options_set_connect_timeout_ms(o, connect_ms),
                  HILOCK_OK);
    int64_t t0 = hl_now_ms();
    long s0 = voluntary_switches();
    r.status = hilock_redlock_create(&r.rl, urls, NMASTERS, o);
    r.switches = voluntary_switches() - s0;
    r.took_ms = hl_now_ms() - t0;
    hilock_options_free(o);
    return r;
}

static void expect_asleep(const create_result *r)
{
    if (r->switches > MAX_SWITCHES)
        fail_msg("create gave up the CPU %ld times in %lld ms: it polls",
                 r->switches, (long long)r->took_ms);
}

static bool connected(const hilock_redlock *rl, size_t i)
{
    return hilock_client_is_connected(hilock_redlock_client(rl, i)) == 1;
}

static void test_create_with_a_stopped_master(void **state)
{
    (void)state;
    const int64_t connect_ms = hl_widen(600);
    hl_fixture_pause(masters[2]);
    create_result r = create(connect_ms);
    hl_fixture_resume(masters[2]);

    /* Two of three are a quorum: made, with the stopped one not voting. */
    assert_status(r.status, HILOCK_OK);
    assert_true(connected(r.rl, 0));
    assert_true(connected(r.rl, 1));
    assert_false(connected(r.rl, 2));
    /* It waited for the stopped master's attempt to end, and no longer. */
    if (r.took_ms < connect_ms - 10 ||
        r.took_ms > connect_ms + hl_widen(1000))
        fail_msg("create took %lld ms with a %lld ms connect timeout",
                 (long long)r.took_ms, (long long)connect_ms);
    expect_asleep(&r);
    assert_status(hilock_redlock_destroy(r.rl), HILOCK_OK);
}

static void test_create_without_a_quorum(void **state)
{
    (void)state;
    const int64_t connect_ms = hl_widen(600);
    hl_fixture_pause(masters[0]);
    hl_fixture_pause(masters[2]);
    create_result r = create(connect_ms);
    hl_fixture_resume(masters[0]);
    hl_fixture_resume(masters[2]);

    assert_status(r.status, HILOCK_ENOQUORUM);
    assert_null(r.rl);
    if (r.took_ms > connect_ms + hl_widen(1000))
        fail_msg("create took %lld ms with a %lld ms connect timeout",
                 (long long)r.took_ms, (long long)connect_ms);
    expect_asleep(&r);
}

static void test_create_with_every_master_up(void **state)
{
    (void)state;
    /* Far longer than connecting takes: returning before it means create
     * woke when the last master connected, not at its deadline. */
    const int64_t connect_ms = hl_widen(20000);
    create_result r = create(connect_ms);

    assert_status(r.status, HILOCK_OK);
    for (size_t i = 0; i < NMASTERS; i++)
        assert_true(connected(r.rl, i));
    if (r.took_ms >= connect_ms / 2)
        fail_msg("create took %lld ms with every master up",
                 (long long)r.took_ms);
    expect_asleep(&r);
    assert_status(hilock_redlock_destroy(r.rl), HILOCK_OK);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_create_with_a_stopped_master),
        T(test_create_without_a_quorum),
        T(test_create_with_every_master_up),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
