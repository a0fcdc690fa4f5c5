/* How long the loop thread stays awake.  After each request it polls for
 * about two of the client's recent round trips, so that an async caller's
 * next request does not wait for a sleeping thread to wake; these tests
 * check the bounds of that: idle, the loop thread sleeps, and an answer
 * the server sits on does not keep it awake while it waits.  The loop
 * thread's CPU time is read from /proc, so that no blocking call of the
 * test itself changes what the loop does. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/loop_call.h"

/* A second of a thread that polls is a second of CPU; one that sleeps
 * spends next to none.  Far below the first, far above the second, on a
 * busy machine or under valgrind alike. */
#define IDLE_CPU_MAX_MS 150

static void note_tid(hilock_client *c, void *arg)
{
    (void)c;
    *(pid_t *)arg = (pid_t)syscall(SYS_gettid);
}

/* The CPU time thread tid has run, in ms (schedstat: ns on a CPU). */
static long long thread_cpu_ms(pid_t tid)
{
    char path[64];
    unsigned long long ns = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("cannot read %s", path);
    if (fscanf(f, "%llu", &ns) != 1)
        fail_msg("no CPU time in %s", path);
    fclose(f);
    return (long long)(ns / 1000000);
}

static void on_reply(hilock_client *c, int status, hilock_reply *reply,
                     void *data)
{
    (void)c;
    (void)status;
    hilock_reply_free(reply);
    atomic_fetch_add((atomic_int *)data, 1);
}

typedef struct count_want {
    atomic_int *count;
    int want;
} count_want;

static bool count_reached(void *arg)
{
    count_want *w = arg;
    return atomic_load(w->count) >= w->want;
}

static void expect_replies(atomic_int *count, int want, int timeout_ms)
{
    count_want w = {count, want};
    if (!hl_wait_until(count_reached, &w, timeout_ms))
        fail_msg("%d replies of %d came", atomic_load(count), want);
}

/* Async PINGs one after another from the loop thread: each reply sends
 * the next, as an async caller's state machine does. */
typedef struct chain {
    atomic_int done;
    int left;
} chain;

static void on_chained(hilock_client *c, int status, hilock_reply *reply,
                       void *data)
{
    chain *ch = data;
    static const char *const ping[] = {"PING"};
    (void)status;
    hilock_reply_free(reply);
    if (--ch->left > 0 &&
        hilock_client_command_async(c, 1, ping, NULL, on_chained, ch) ==
            HILOCK_OK)
        return;
    atomic_store(&ch->done, 1);
}

/* A client whose loop thread (*loop_tid) has just answered n PINGs in a
 * chain, so that it knows its round trip. */
static hilock_client *warm_client(pid_t *loop_tid, int n)
{
    hilock_client *c = hl_new_client(hl_fixture_plain(), NULL);
    static const char *const ping[] = {"PING"};
    static chain ch;
    hl_run_on_loop(c, note_tid, loop_tid);
    atomic_store(&ch.done, 0);
    ch.left = n;
    assert_int_equal(hilock_client_command_async(c, 1, ping, NULL,
                                                 on_chained, &ch),
                     HILOCK_OK);
    expect_replies(&ch.done, 1, hl_widen(30000));
    return c;
}

static void test_loop_sleeps_when_idle(void **state)
{
    (void)state;
    pid_t loop_tid = 0;
    hilock_client *c = warm_client(&loop_tid, 500);

    long long before = thread_cpu_ms(loop_tid);
    hl_sleep_ms(1000);
    long long spent = thread_cpu_ms(loop_tid) - before;
    print_message("    loop thread idle for 1 s: %lld ms of CPU\n", spent);
    if (spent > IDLE_CPU_MAX_MS)
        fail_msg("the idle loop thread ran %lld ms in a second", spent);
    hl_free_client(c);
}

/* A reply the server keeps for a second (DEBUG SLEEP): the loop polls
 * for a few round trips after sending it, then sleeps until it comes. */
static void test_loop_sleeps_while_an_answer_is_slow(void **state)
{
    (void)state;
    pid_t loop_tid = 0;
    hilock_client *c = warm_client(&loop_tid, 200);

    static atomic_int slept;
    static const char *const sleep1[] = {"DEBUG", "SLEEP", "1"};
    long long before = thread_cpu_ms(loop_tid);
    assert_int_equal(hilock_client_command_async(c, 3, sleep1, NULL,
                                                 on_reply, &slept),
                     HILOCK_OK);
    expect_replies(&slept, 1, hl_widen(30000));
    long long spent = thread_cpu_ms(loop_tid) - before;
    print_message("    loop thread while the server slept 1 s: %lld ms of "
                  "CPU\n", spent);
    if (spent > IDLE_CPU_MAX_MS)
        fail_msg("the loop thread ran %lld ms waiting for a slow answer",
                 spent);
    hl_free_client(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_sleeps_when_idle),
        cmocka_unit_test(test_loop_sleeps_while_an_answer_is_slow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
