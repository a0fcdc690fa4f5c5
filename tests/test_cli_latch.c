/* hilock latch set|down|count|wait and `hilock status` of a latch, as
 * scripts use them: output and exit statuses against one real
 * redis-server, with the library playing the workers. */
/* ctest-timeout: 120 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/cli_run.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

#ifndef HILOCK_TOOL_PATH
#error "HILOCK_TOOL_PATH must name the hilock executable"
#endif

#define OUT_CAP 4096

/* hilock --redis URL ARGS... (NULL-terminated); output into out. */
#define tool(out, ...) hl_cli_run((out), OUT_CAP, __VA_ARGS__)

static void test_set_down_count_status(void **state)
{
    (void)state;
    char out[OUT_CAP];
    assert_int_equal(tool(out, "latch", "set", "cl:a", "3", NULL), 0);
    assert_string_equal(out, "set 3\n");
    /* A count is there: left alone, exit 1. */
    assert_int_equal(tool(out, "latch", "set", "cl:a", "5", NULL), 1);
    assert_non_null(strstr(out, "counts 3 already"));
    assert_int_equal(tool(out, "latch", "count", "cl:a", NULL), 0);
    assert_string_equal(out, "3\n");
    assert_int_equal(tool(out, "status", "cl:a", NULL), 0);
    assert_string_equal(out, "{\"name\":\"cl:a\",\"kind\":\"latch\","
                             "\"count\":3,\"open\":false}\n");
    assert_int_equal(tool(out, "latch", "down", "cl:a", NULL), 0);
    assert_string_equal(out, "2\n");
    assert_int_equal(tool(out, "latch", "down", "cl:a", NULL), 0);
    assert_int_equal(tool(out, "latch", "down", "cl:a", NULL), 0);
    assert_string_equal(out, "0\n");
    assert_int_equal(tool(out, "latch", "wait", "cl:a", NULL), 0);
    assert_string_equal(out, "open\n");
    assert_int_equal(tool(out, "status", "--kind", "latch", "cl:a", NULL), 0);
    assert_string_equal(out, "{\"name\":\"cl:a\",\"kind\":\"latch\","
                             "\"count\":0,\"open\":true}\n");
}

static void test_wait_timeout_exits_75(void **state)
{
    (void)state;
    char out[OUT_CAP];
    assert_int_equal(tool(out, "latch", "set", "cl:t", "1", NULL), 0);
    int64_t t0 = hl_now_ms();
    assert_int_equal(tool(out, "latch", "wait", "cl:t", "--timeout", "200",
                          NULL),
                     75);
    assert_true(hl_now_ms() - t0 >= 200);
    assert_non_null(strstr(out, "still counts above zero"));
    assert_int_equal(tool(out, "latch", "wait", "--timeout=0", "cl:t", NULL),
                     75);
}

typedef struct waiter {
    int rc;
    int64_t done_ms;
    char out[OUT_CAP];
} waiter;

static void *wait_main(void *arg)
{
    waiter *w = arg;
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis", hl_cli_url,
                          "latch", "wait",
                          "cl:w", "--timeout", "20000", NULL};
    w->rc = hl_run(argv, w->out, sizeof w->out, hl_widen(30000));
    w->done_ms = hl_now_ms();
    return NULL;
}

/* The waiting command ends when workers (the library here) take the
 * count to zero. */
static void test_wait_ends_at_zero(void **state)
{
    (void)state;
    hilock_client *c = hl_new_client(hl_cli_server, NULL);
    hilock_latch *l;
    assert_int_equal(hilock_latch_create(&l, c, "cl:w"), HILOCK_OK);
    assert_int_equal(hilock_latch_try_set_count(l, 2, NULL), HILOCK_OK);
    waiter w;
    memset(&w, 0, sizeof w);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_main, &w), 0);
    hl_expect_numsub(hl_cli_server,
                     "redisson_countdownlatch__channel__{cl:w}", 1,
                     1);
    assert_int_equal(hilock_latch_count_down(l, NULL), HILOCK_OK);
    assert_int_equal(hilock_latch_count_down(l, NULL), HILOCK_OK);
    int64_t zero_at = hl_now_ms();
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    assert_string_equal(w.out, "open\n");
    /* Woken by the count down's message, not at the end of its wait. */
    assert_true(w.done_ms - zero_at < hl_widen(1000));
    hilock_latch_destroy(l);
    hl_free_client(c);
}

/* A name nobody set is no open latch: wait says so at once, where it
 * used to print "open" and let `latch wait NAME && merge` go on after a
 * typo.  --missing-ok takes it for open, as Redisson does. */
static void test_wait_for_a_latch_never_set(void **state)
{
    (void)state;
    char out[OUT_CAP];
    int64_t t0 = hl_now_ms();
    assert_int_equal(tool(out, "latch", "wait", "cl:typo", NULL), 66);
    assert_non_null(strstr(out, "no latch cl:typo"));
    assert_null(strstr(out, "open\n"));
    assert_true(hl_now_ms() - t0 < hl_widen(5000));
    assert_int_equal(tool(out, "latch", "wait", "--missing-ok", "cl:typo",
                          NULL),
                     0);
    assert_string_equal(out, "open\n");
    /* Set and opened by other processes through the library: open. */
    hilock_client *c = hl_new_client(hl_cli_server, NULL);
    hilock_latch *l;
    assert_int_equal(hilock_latch_create(&l, c, "cl:opened"), HILOCK_OK);
    bool seen = true;
    assert_int_equal(hilock_latch_was_set(l, &seen), HILOCK_OK);
    assert_false(seen);
    assert_int_equal(hilock_latch_try_set_count(l, 1, NULL), HILOCK_OK);
    assert_int_equal(hilock_latch_was_set(l, &seen), HILOCK_OK);
    assert_true(seen);
    int64_t left = -1;
    assert_int_equal(hilock_latch_count_down(l, &left), HILOCK_OK);
    assert_int_equal(left, 0);
    hilock_latch_destroy(l);
    hl_free_client(c);
    assert_int_equal(tool(out, "latch", "wait", "cl:opened", NULL), 0);
    assert_string_equal(out, "open\n");
    /* Set by Redisson's way alone (a bare count) and opened the same way:
     * nothing says it was ever a latch. */
    char reply[64];
    hl_redis_server_cmd(hl_cli_server, reply, sizeof reply, "SET", "cl:java",
                        "1",
                        (char *)NULL);
    hl_redis_server_cmd(hl_cli_server, reply, sizeof reply, "DEL", "cl:java",
                        (char *)NULL);
    assert_int_equal(tool(out, "latch", "wait", "cl:java", NULL), 66);
}

/* down counts down a latch of ours only: another program's integer, a
 * semaphore and a name with nothing are refused, each with its word to
 * go on anyway where that makes sense. */
static void test_down_refuses_what_is_no_latch(void **state)
{
    (void)state;
    char out[OUT_CAP], reply[64];
    hl_redis_server_cmd(hl_cli_server, reply, sizeof reply, "SET", "cl:visits",
                        "41", (char *)NULL);
    assert_int_equal(tool(out, "latch", "down", "cl:visits", NULL), 65);
    assert_non_null(strstr(out, "counts 41, but no hilock client set it"));
    assert_true(hl_raw_bulk(hl_cli_server, reply, sizeof reply, "GET",
                            "cl:visits",
                            (char *)NULL));
    assert_string_equal(reply, "41");
    /* A latch only Redisson set looks the same: counted down when asked. */
    assert_int_equal(tool(out, "latch", "down", "--foreign-ok", "cl:visits",
                          NULL),
                     0);
    assert_string_equal(out, "40\n");

    hilock_client *c = hl_new_client(hl_cli_server, NULL);
    hilock_semaphore *sem;
    bool set = false;
    int64_t available = 0;
    assert_int_equal(hilock_semaphore_create(&sem, c, "cl:sem"),
                     HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_set(sem, 2, &set), HILOCK_OK);
    assert_int_equal(hilock_semaphore_available(sem, &available), HILOCK_OK);
    assert_int_equal(tool(out, "latch", "down", "--foreign-ok", "cl:sem",
                          NULL),
                     65);
    assert_non_null(strstr(out, "cl:sem is a semaphore, not a latch"));
    assert_int_equal(hilock_semaphore_available(sem, &available), HILOCK_OK);
    assert_int_equal(available, 2);
    hilock_semaphore_destroy(sem);
    hl_free_client(c);

    assert_int_equal(tool(out, "latch", "down", "cl:nothing", NULL), 66);
    assert_non_null(strstr(out, "no latch cl:nothing"));
    assert_int_equal(tool(out, "latch", "down", "--missing-ok", "cl:nothing",
                          NULL),
                     0);
    assert_string_equal(out, "0\n");
    /* Counting down nothing left no word that it opened. */
    assert_int_equal(tool(out, "latch", "wait", "cl:nothing", NULL), 66);

    /* Set through hilock: counted down, as always. */
    assert_int_equal(tool(out, "latch", "set", "cl:ours", "2", NULL), 0);
    assert_int_equal(tool(out, "latch", "down", "cl:ours", NULL), 0);
    assert_string_equal(out, "1\n");
}

/* Output that cannot be written is no success: a full disk is exit 70,
 * with a word on stderr. */
static void test_unwritable_output(void **state)
{
    (void)state;
    char cmd[512], out[OUT_CAP];
    snprintf(cmd, sizeof cmd,
             "'%s' --redis '%s' latch count cl:full > /dev/full",
             HILOCK_TOOL_PATH, hl_cli_url);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    assert_int_equal(hl_run(argv, out, sizeof out, hl_widen(20000)), 70);
    assert_non_null(strstr(out, "hilock: stdout"));
}

static void test_errors(void **state)
{
    (void)state;
    char out[OUT_CAP];
    const char *bad_counts[] = {"0", "-1", "9007199254740992", "1x", "",
                                "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_counts / sizeof bad_counts[0]; i++)
        assert_int_equal(tool(out, "latch", "set", "cl:e", bad_counts[i],
                              NULL),
                         64);
    assert_int_equal(tool(out, "latch", "set", "cl:e", NULL), 64);
    assert_int_equal(tool(out, "latch", NULL), 64);
    assert_int_equal(tool(out, "latch", "up", "cl:e", NULL), 64);
    assert_int_equal(tool(out, "latch", "count", NULL), 64);
    assert_int_equal(tool(out, "latch", "wait", "cl:e", "--timeout", "-5",
                          NULL),
                     64);
    assert_int_equal(tool(out, "latch", "down", "cl:e", "--timeout", "5",
                          NULL),
                     64);
    hilock_client *c = hl_new_client(hl_cli_server, NULL);
    const char *hset[] = {"HSET", "cl:hash", "f", "1"};
    assert_int_equal(hilock_client_command(c, 4, hset, NULL, NULL),
                     HILOCK_OK);
    hl_free_client(c);
    assert_int_equal(tool(out, "latch", "count", "cl:hash", NULL), 65);
    assert_int_equal(tool(out, "latch", "down", "cl:hash", NULL), 65);
    assert_int_equal(tool(out, "latch", "wait", "cl:hash", NULL), 65);

    /* Nobody listens on this port. */
    const char *argv[] = {HILOCK_TOOL_PATH, "--redis",
                          "redis://127.0.0.1:1?connect_timeout=500",
                          "latch", "count", "cl:e", NULL};
    assert_int_equal(hl_run(argv, out, sizeof out, hl_widen(20000)), 69);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_down_count_status),
        cmocka_unit_test(test_wait_timeout_exits_75),
        cmocka_unit_test(test_wait_ends_at_zero),
        cmocka_unit_test(test_wait_for_a_latch_never_set),
        cmocka_unit_test(test_down_refuses_what_is_no_latch),
        cmocka_unit_test(test_unwritable_output),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, hl_cli_group_setup,
                                  hl_cli_group_teardown);
}
