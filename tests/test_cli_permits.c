/* hilock run --permits on a real server: at most N commands at once
 * across processes, exit 76 when the permit is lost, hilock status of a
 * semaphore, usage errors. */
/* ctest-timeout: 120 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

static hl_redis_server *server;
static char url[64];

static int group_setup(void **state)
{
    (void)state;
    server = hl_fixture_plain();
    if (server == NULL)
        return -1;
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             hl_redis_server_port(server));
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    hl_redis_server_stop(server);
    return 0;
}

typedef struct job {
    pthread_t thread;
    const char **argv;
    int rc;
    char out[2048];
    atomic_bool done;
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    j->rc = hl_run(j->argv, j->out, sizeof j->out, hl_widen(30000));
    atomic_store(&j->done, true);
    return NULL;
}

static void job_start(job *j, const char **argv)
{
    memset(j, 0, sizeof *j);
    j->argv = argv;
    atomic_init(&j->done, false);
    assert_int_equal(pthread_create(&j->thread, NULL, job_main, j), 0);
}

static long long get_int(const char *key)
{
    char raw[64];
    assert_true(hl_redis_server_cmd(server, raw, sizeof raw, "GET", key,
                                    (char *)NULL) > 0);
    if (raw[0] != '$' || raw[1] == '-')
        return 0;
    const char *nl = strchr(raw, '\n');
    return nl ? atoll(nl + 1) : 0;
}

/* Each command counts itself in while it runs and records the most that
 * were in at once, with redis-cli against the same server. */
static void test_bound(void **state)
{
    (void)state;
    enum { JOBS = 5 };
    char script[1024];
    int port = hl_redis_server_port(server);
    snprintf(script, sizeof script,
             "v=$(redis-cli -p %d incr inside) && "
             "redis-cli -p %d eval \"if tonumber(ARGV[1]) > "
             "tonumber(redis.call('get', KEYS[1]) or '0') then "
             "redis.call('set', KEYS[1], ARGV[1]) end\" 1 most $v "
             ">/dev/null && sleep 0.3 && redis-cli -p %d decr inside "
             ">/dev/null",
             port, port, port);
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                          "--permits", "2", "cli-jobs", "--", "sh", "-c",
                          script, NULL};
    job j[JOBS];
    for (int i = 0; i < JOBS; i++)
        job_start(&j[i], argv);
    for (int i = 0; i < JOBS; i++) {
        hl_join_within(j[i].thread, &j[i].done, hl_widen(40000));
        if (j[i].rc != 0)
            fail_msg("job %d exited %d: %s", i, j[i].rc, j[i].out);
    }
    assert_int_equal(get_int("most"), 2);
    assert_int_equal(get_int("inside"), 0);
    /* Every permit came back. */
    assert_int_equal(get_int("cli-jobs"), 2);
}

static void *delete_permit(void *arg)
{
    (void)arg;
    char raw[256];
    int64_t until = hl_now_ms() + hl_widen(10000);
    while (hl_now_ms() < until) {
        hl_redis_server_cmd(server, raw, sizeof raw, "ZCARD",
                            "{cli-lost}:timeout", (char *)NULL);
        if (strcmp(raw, ":1\r\n") == 0)
            break;
        hl_sleep_ms(10);
    }
    hl_redis_server_cmd(server, raw, sizeof raw, "DEL", "{cli-lost}:timeout",
                        (char *)NULL);
    return NULL;
}

static void test_lost_exits_76(void **state)
{
    (void)state;
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "--watchdog",
                          "600", "run", "--permits", "1", "cli-lost", "--",
                          "sleep", "5", NULL};
    char out[2048];
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, delete_permit, NULL), 0);
    int rc = hl_run(argv, out, sizeof out, hl_widen(30000));
    pthread_join(t, NULL);
    if (rc != 76)
        fail_msg("exited %d, expected 76: %s", rc, out);
    assert_non_null(strstr(out, "lost"));
}

static bool one_permit_held(void *arg)
{
    char raw[64];
    hl_redis_server_cmd(server, raw, sizeof raw, "ZCARD", (const char *)arg,
                        (char *)NULL);
    return strcmp(raw, ":1\r\n") == 0;
}

/* status shows the free count and the permit held, with its time left. */
static void test_status(void **state)
{
    (void)state;
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", url, "--watchdog",
                          "5000", "run", "--permits", "2", "cli-st", "--",
                          "sleep", "2", NULL};
    job j;
    job_start(&j, argv);
    assert_true(hl_wait_until(one_permit_held, "{cli-st}:timeout",
                              hl_widen(10000)));
    char out[2048];
    const char *st[] = {HILOCK_TOOL_PATH, "--redis", url, "status", "cli-st",
                        NULL};
    assert_int_equal(hl_run(st, out, sizeof out, hl_widen(10000)), 0);
    assert_non_null(strstr(out, "\"kind\":\"semaphore\",\"available\":1,"
                                "\"permits\":[{\"id\":\""));
    const char *ttl = strstr(out, "\"ttl_ms\":");
    assert_non_null(ttl);
    long long left = atoll(ttl + 9);
    assert_true(left > 0 && left <= 5000);
    hl_join_within(j.thread, &j.done, hl_widen(20000));
    assert_int_equal(j.rc, 0);
    /* A hash is not a semaphore. */
    const char *hash[] = {HILOCK_TOOL_PATH, "--redis", url, "status",
                          "--kind", "semaphore", "cli-hash", NULL};
    char raw[64];
    assert_true(hl_redis_server_cmd(server, raw, sizeof raw, "HSET",
                                    "cli-hash", "a", "1", (char *)NULL) > 0);
    assert_int_equal(hl_run(hash, out, sizeof out, hl_widen(10000)), 65);
}

static void test_usage(void **state)
{
    (void)state;
    char out[2048];
    const char *zero[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                          "--permits", "0", "n", "--", "true", NULL};
    assert_int_equal(hl_run(zero, out, sizeof out, hl_widen(10000)), 64);
    const char *neg[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                         "--permits", "-3", "n", "--", "true", NULL};
    assert_int_equal(hl_run(neg, out, sizeof out, hl_widen(10000)), 64);
    const char *big[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                         "--permits", "2147483648", "n", "--", "true", NULL};
    assert_int_equal(hl_run(big, out, sizeof out, hl_widen(10000)), 64);
    const char *kind[] = {HILOCK_TOOL_PATH, "--redis", url, "run",
                          "--permits", "1", "--kind", "fair", "n", "--",
                          "true", NULL};
    assert_int_equal(hl_run(kind, out, sizeof out, hl_widen(10000)), 64);
    assert_non_null(strstr(out, "--permits"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_lost_exits_76),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
