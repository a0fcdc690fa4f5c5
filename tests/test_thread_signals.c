/* The threads the library starts take no signals.  A process-directed
 * signal goes to any thread that does not block it; should that be one of
 * ours, the application's handler runs there, beside the application's
 * own threads, and the flags it sets race with the code that reads them
 * (the CLI's `run` saw exactly that under ThreadSanitizer).  Every loop
 * thread, a client's and a RedLock's, must therefore block every signal
 * from its first instruction. */
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/multi.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"

#define MAX_THREADS 256

/* The ids of this process's threads. */
static size_t list_threads(long *out, size_t cap)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    size_t n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            assert_true(n < cap);
            out[n++] = strtol(e->d_name, NULL, 10);
        }
    closedir(d);
    return n;
}

static bool listed(const long *ids, size_t n, long id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* The blocked-signal mask of thread tid, as /proc shows it. */
static uint64_t blocked_of(long tid)
{
    char path[64], line[256];
    uint64_t mask = 0;
    bool found = false;
    FILE *fp;

    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    fp = fopen(path, "r");
    assert_non_null(fp);
    while (fgets(line, sizeof line, fp) != NULL)
        if (strncmp(line, "SigBlk:", 7) == 0) {
            mask = strtoull(line + 7, NULL, 16);
            found = true;
        }
    fclose(fp);
    assert_true(found);
    return mask;
}

/* The first standard signal that can be blocked and that mask leaves
 * open, or 0; with faults_too false, not counting the signals a fault
 * raises in the thread that runs into it. */
static int first_open(uint64_t mask, bool faults_too)
{
    for (int sig = 1; sig < 32; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        if (!faults_too &&
            (sig == SIGILL || sig == SIGTRAP || sig == SIGBUS ||
             sig == SIGFPE || sig == SIGSEGV || sig == SIGSYS))
            continue;
        if (!(mask & (UINT64_C(1) << (sig - 1))))
            return sig;
    }
    return 0;
}

static bool blocks_all(void *arg)
{
    return first_open(blocked_of(*(long *)arg), true) == 0;
}

/* Every thread not in before blocks every standard signal that can be
 * blocked.  Returns how many such threads there are.  A checker such as
 * valgrind, which must catch the fault signals itself, leaves those open
 * at the kernel while a thread runs, and applies the thread's own mask
 * only while it waits in a system call: a thread that leaves only those
 * open is looked at again until it waits, as a loop thread soon does. */
static size_t check_new_threads(const long *before, size_t n_before)
{
    long now[MAX_THREADS];
    size_t n = list_threads(now, MAX_THREADS), fresh = 0;

    for (size_t i = 0; i < n; i++) {
        if (listed(before, n_before, now[i]))
            continue;
        uint64_t mask = blocked_of(now[i]);
        fresh++;
        int sig = first_open(mask, false);
        if (sig == 0 && !hl_wait_until(blocks_all, &now[i], hl_widen(10000)))
            sig = first_open(mask = blocked_of(now[i]), true);
        if (sig != 0)
            fail_msg("thread %ld takes signal %d (%s): SigBlk %016llx",
                     now[i], sig, strsignal(sig), (unsigned long long)mask);
    }
    return fresh;
}

static void test_client_loop_thread_takes_no_signal(void **state)
{
    long before[MAX_THREADS];
    size_t n;
    hilock_client *c;

    (void)state;
    n = list_threads(before, MAX_THREADS);
    c = hl_new_client(hl_fixture_plain(), NULL);
    assert_true(check_new_threads(before, n) >= 1);
    hl_free_client(c);
}

static void test_redlock_loop_thread_takes_no_signal(void **state)
{
    long before[MAX_THREADS];
    hl_redis_server *masters[3];
    char url[3][96];
    const char *urls[3];
    hilock_redlock *rl = NULL;
    size_t n;

    (void)state;
    hl_fixture_masters(masters, 3);
    for (int i = 0; i < 3; i++) {
        snprintf(url[i], sizeof url[i], "redis://127.0.0.1:%d",
                 hl_redis_server_port(masters[i]));
        urls[i] = url[i];
    }
    n = list_threads(before, MAX_THREADS);
    assert_int_equal(hilock_redlock_create(&rl, urls, 3, NULL), HILOCK_OK);
    assert_true(check_new_threads(before, n) >= 1);
    assert_int_equal(hilock_redlock_destroy(rl), HILOCK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_loop_thread_takes_no_signal),
        cmocka_unit_test(test_redlock_loop_thread_takes_no_signal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
