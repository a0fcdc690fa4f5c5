/* A bounded buffer shared by producer and consumer processes through a
 * lock and two conditions (not full, not empty), on a real redis-server,
 * while the test kills every client's connections (CLIENT KILL) and one
 * consumer (kill -9).  Checked beside the buffer, by what the server
 * keeps of each item apart from it: every item produced is consumed
 * exactly once, the buffer never holds more than its bound, and no
 * consumer sleeps while an item waits, for longer than the waiter
 * timeout allows. */
/* ctest-timeout: 300 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "redis_server.h"
#include "support/children.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"

static hl_lock_fixture fx;

#define BOUND 4
#define PRODUCERS 2
#define CONSUMERS 2
#define PER_PRODUCER 150
#define ITEMS (PRODUCERS * PER_PRODUCER)
#define WAITER_MS 1500
#define WATCHDOG_MS 1500

/* Exits of a child that tell what went wrong. */
enum { CHILD_SETUP = 10, CHILD_OVERFLOW = 11, CHILD_STUCK = 12 };

/* Each step refuses (-1) unless the caller's owner holds the lock on
 * the server (KEYS[3], ARGV[1] its field), as a fenced write would: a
 * hold lost to a fault cannot write, so an overfull buffer can only mean
 * two holders at once. */

/* Pushes ARGV[2] once however often it is tried (the produced set says
 * whether it was), answering the buffer's length: a try whose answer was
 * lost to a killed connection is tried again without a second push. */
static const char push_lua[] =
    "if redis.call('hexists', KEYS[3], ARGV[1]) == 0 then return -1 end\n"
    "if redis.call('sadd', KEYS[2], ARGV[2]) == 1 then\n"
    "  redis.call('rpush', KEYS[1], ARGV[2])\n"
    "end\n"
    "return redis.call('llen', KEYS[1])\n";

/* Moves the oldest item to the done list, in one step: an item is
 * consumed when it is there, whatever happens to its consumer after. */
static const char take_lua[] =
    "if redis.call('hexists', KEYS[3], ARGV[1]) == 0 then return -1 end\n"
    "redis.call('lmove', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')\n"
    "return redis.call('llen', KEYS[2])\n";

static int eval(hilock_client *c, const char *script, const char *item,
                long long *out)
{
    char field[64];
    snprintf(field, sizeof field, "%s:%llu", hilock_client_id(c),
             (unsigned long long)hilock_thread_owner());
    const char *argv[] = {"EVAL", script, "3", "buf:items",
                          item ? "buf:produced" : "buf:done", "buf", field,
                          item ? item : ""};
    hilock_reply *r = NULL;
    int rc = hilock_client_command(c, 8, argv, NULL, &r);
    if (rc == HILOCK_OK && r->type == HILOCK_REPLY_INTEGER &&
        r->integer < 0)
        rc = HILOCK_ENOTOWNER;
    if (rc == HILOCK_OK && r->type == HILOCK_REPLY_INTEGER)
        *out = r->integer;
    else if (rc == HILOCK_OK)
        rc = HILOCK_EPROTO;
    hilock_reply_free(r);
    return rc;
}

/* The integer a command answers; -1 when the server cannot say. */
static long long int_reply(hilock_client *c, int argc,
                           const char *const *argv)
{
    hilock_reply *r = NULL;
    long long n = -1;
    if (hilock_client_command(c, argc, argv, NULL, &r) == HILOCK_OK &&
        r->type == HILOCK_REPLY_INTEGER)
        n = r->integer;
    hilock_reply_free(r);
    return n;
}

static long long llen(hilock_client *c, const char *key)
{
    const char *argv[] = {"LLEN", key};
    return int_reply(c, 2, argv);
}

/* The count at key (INCRBY 0 reads it as a number, 0 when unset). */
static long long count_at(hilock_client *c, const char *key)
{
    const char *argv[] = {"INCRBY", key, "0"};
    return int_reply(c, 3, argv);
}

typedef struct side {
    hilock_client *client;
    hilock_lock *lock;
    hilock_cond *not_full, *not_empty;
} side;

static bool side_open(side *s)
{
    hl_client_opts o = {.watchdog_ms = WATCHDOG_MS, .waiter_ms = WAITER_MS};
    char why[256];
    s->client = hl_open_client(fx.server, &o, why, sizeof why);
    return s->client != NULL &&
           hilock_lock_create(&s->lock, s->client, "buf") == HILOCK_OK &&
           hilock_cond_create(&s->not_full, s->lock, "not-full") ==
               HILOCK_OK &&
           hilock_cond_create(&s->not_empty, s->lock, "not-empty") ==
               HILOCK_OK;
}

/* Take the lock, however long connections take to come back. */
static void lock_it(side *s)
{
    while (hilock_lock_acquire(s->lock) != HILOCK_OK)
        usleep(10000);
}

static int command(side *s, int argc, const char *const *argv)
{
    hilock_reply *r = NULL;
    int rc = hilock_client_command(s->client, argc, argv, NULL, &r);
    hilock_reply_free(r);
    return rc;
}

/* Wait on cond with the lock held, counting the wait on the server (the
 * test checks that both conditions were waited on), and saying it sleeps
 * under buf:asleep:<role>:<pid> meanwhile; true when the lock is held
 * again after it, false when the wait let it go (timed out, or a fault
 * ended it). */
static bool wait_on(side *s, hilock_cond *cond, const char *counter,
                    char role)
{
    char asleep[48];
    snprintf(asleep, sizeof asleep, "buf:asleep:%c:%d", role, (int)getpid());
    const char *count[] = {"INCR", counter};
    const char *mark[] = {"SET", asleep, "1"};
    const char *unmark[] = {"DEL", asleep};
    command(s, 2, count);
    command(s, 3, mark);
    bool held = hilock_cond_wait(cond, 10 * WAITER_MS) == HILOCK_OK;
    /* A word left behind would read as a sleeper for good. */
    while (command(s, 2, unmark) != HILOCK_OK)
        usleep(10000);
    return held;
}

/* The first half of the items comes slowly, so that consumers find the
 * buffer empty and wait; the second half is taken slowly, so that
 * producers find it full and wait. */
#define SLOW_US 3000

/* In the first half, a producer that made an item waits, a while at
 * most, until a consumer has gone to wait for the next one (the count of
 * such waits passes seen): consumers slower than SLOW_US, as under
 * valgrind, would otherwise seldom find the buffer empty. */
static void let_a_consumer_wait(side *s, long long seen)
{
    int64_t until = hl_now_ms() + hl_widen(1000);
    while (count_at(s->client, "buf:waits:not-empty") <= seen &&
           hl_now_ms() < until)
        usleep(SLOW_US);
}

/* Release; a hold lost meanwhile is not an error here, the server's
 * sets are the judges. */
static void unlock_it(side *s) { (void)hilock_lock_release(s->lock); }

static _Noreturn void producer(int n)
{
    side s = {0};
    if (!side_open(&s))
        _exit(CHILD_SETUP);
    for (int k = 0; k < PER_PRODUCER; k++) {
        char item[32];
        snprintf(item, sizeof item, "p%d-%d", n, k);
        lock_it(&s);
        long long seen = count_at(s.client, "buf:waits:not-empty");
        for (;;) {
            long long len = llen(s.client, "buf:items");
            if (len >= BOUND) {
                if (!wait_on(&s, s.not_full, "buf:waits:not-full", 'p'))
                    lock_it(&s);
                continue;
            }
            long long after = 0;
            int rc = len < 0 ? HILOCK_EIO
                             : eval(s.client, push_lua, item, &after);
            if (rc == HILOCK_OK) {
                if (after > BOUND)
                    _exit(CHILD_OVERFLOW);
                break;
            }
            /* A fault: the hold may be gone; take the lock again. */
            unlock_it(&s);
            usleep(10000);
            lock_it(&s);
        }
        (void)hilock_cond_signal(s.not_empty, NULL);
        unlock_it(&s);
        if (k < PER_PRODUCER / 2)
            let_a_consumer_wait(&s, seen);
    }
    _exit(0);
}

static _Noreturn void consumer(void)
{
    side s = {0};
    if (!side_open(&s))
        _exit(CHILD_SETUP);
    for (;;) {
        lock_it(&s);
        long long done = llen(s.client, "buf:done");
        if (done >= ITEMS) {
            /* Everyone else may stop looking too. */
            (void)hilock_cond_broadcast(s.not_empty, NULL);
            unlock_it(&s);
            _exit(0);
        }
        long long len = llen(s.client, "buf:items");
        if (len <= 0) {
            if (wait_on(&s, s.not_empty, "buf:waits:not-empty", 'c'))
                unlock_it(&s);
            continue;
        }
        long long got = 0;
        (void)eval(s.client, take_lua, NULL, &got);
        (void)hilock_cond_signal(s.not_full, NULL);
        unlock_it(&s);
        if (got >= ITEMS / 2)
            usleep(SLOW_US);
    }
}

/* The processes of a role asleep in a wait, as they say, but for one
 * killed (pid; 0: none). */
static long long sleeping(char role, pid_t killed)
{
    char pattern[32], reply[4096], mine[48];
    snprintf(pattern, sizeof pattern, "buf:asleep:%c:*", role);
    if (hl_raw_cmd(fx.server, reply, sizeof reply, "KEYS", pattern,
                   (char *)NULL) != '*')
        fail_msg("KEYS %s: %s", pattern, reply);
    long long n = atoll(reply + 1);
    snprintf(mine, sizeof mine, "\r\nbuf:asleep:%c:%d\r\n", role,
             (int)killed);
    if (killed != 0 && strstr(reply, mine) != NULL)
        n--;
    return n;
}

/* How long a side has been asleep while the buffer had what it waits
 * for; fails past limit. */
typedef struct stall {
    const char *what;
    long long since, worst;
} stall;

static void watch(stall *s, bool stalled, long long limit)
{
    if (!stalled) {
        s->since = 0;
        return;
    }
    long long now = hl_now_ms();
    if (s->since == 0)
        s->since = now;
    if (now - s->since > s->worst)
        s->worst = now - s->since;
    if (s->worst > limit)
        fail_msg("%s for %lld ms", s->what, s->worst);
}

static void test_bounded_buffer_under_faults(void **state)
{
    (void)state;
    for (int i = 0; i < PRODUCERS; i++)
        if (hl_children_fork(&fx.kids, i) == 0)
            producer(i);
    for (int i = 0; i < CONSUMERS; i++)
        if (hl_children_fork(&fx.kids, PRODUCERS + i) == 0)
            consumer();

    /* An item waiting while a consumer sleeps, or room while a producer
     * sleeps, for longer than a taken signal may lie unused (the waiter
     * timeout) and a look comes round (a third of it), is a lost
     * wake-up. */
    const long long stuck_limit = hl_widen(2 * WAITER_MS);
    stall items_wait = {"an item waited while a consumer slept", 0, 0};
    stall room_waits = {"room waited while a producer slept", 0, 0};
    bool killed_clients = false, killed_consumer = false;
    pid_t killed = 0;
    int64_t deadline = hl_now_ms() + hl_widen(120000);
    for (;;) {
        long long done = hl_raw_int(fx.server, "LLEN", "buf:done",
                                    (char *)NULL);
        if (done >= ITEMS)
            break;
        if (hl_now_ms() > deadline)
            fail_msg("only %lld of %d items consumed in time", done, ITEMS);
        if (!killed_clients && done >= ITEMS / 4) {
            assert_true(hl_fixture_client_kill(fx.server, "normal") > 0);
            assert_true(hl_fixture_client_kill(fx.server, "pubsub") > 0);
            killed_clients = true;
        }
        if (!killed_consumer && done >= ITEMS / 2) {
            killed = fx.kids.pid[PRODUCERS];
            assert_int_equal(hl_children_kill(&fx.kids, PRODUCERS), 0);
            killed_consumer = true;
        }
        long long items = hl_raw_int(fx.server, "LLEN", "buf:items",
                                     (char *)NULL);
        if (items > BOUND)
            fail_msg("the buffer holds %lld items, over its bound %d",
                     items, BOUND);
        watch(&items_wait, items > 0 && sleeping('c', killed) > 0,
              stuck_limit);
        watch(&room_waits, items < BOUND && sleeping('p', killed) > 0,
              stuck_limit);
        hl_sleep_ms(10);
    }
    assert_true(killed_clients && killed_consumer);
    assert_true(hl_children_wait(&fx.kids, hl_widen(60000)));
    for (int i = 0; i < PRODUCERS + CONSUMERS; i++) {
        if (i == PRODUCERS)
            continue; /* killed */
        int st = fx.kids.status[i];
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("child %d ended with %d", i,
                     WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    }
    /* Exactly once: every produced item is in the done list, once. */
    assert_int_equal(hl_raw_int(fx.server, "SCARD", "buf:produced",
                                (char *)NULL),
                     ITEMS);
    assert_int_equal(hl_raw_int(fx.server, "LLEN", "buf:done", (char *)NULL),
                     ITEMS);
    assert_int_equal(hl_raw_int(fx.server, "LLEN", "buf:items",
                                (char *)NULL),
                     0);
    long long empty_waits = hl_raw_int(fx.server, "INCRBY",
                                       "buf:waits:not-empty", "0",
                                       (char *)NULL);
    long long full_waits = hl_raw_int(fx.server, "INCRBY", "buf:waits:not-full",
                                      "0", (char *)NULL);
    print_message("# waits: %lld for an item, %lld for room\n", empty_waits,
                  full_waits);
    assert_true(empty_waits >= 10);
    assert_true(full_waits >= 10);
    static char done_list[64 * 1024];
    assert_int_equal(hl_raw_cmd(fx.server, done_list, sizeof done_list,
                                "LRANGE", "buf:done", "0", "-1",
                                (char *)NULL),
                     '*');
    for (int n = 0; n < PRODUCERS; n++)
        for (int k = 0; k < PER_PRODUCER; k++) {
            char item[40];
            snprintf(item, sizeof item, "\r\np%d-%d\r\n", n, k);
            if (strstr(done_list, item) == NULL)
                fail_msg("p%d-%d was never consumed", n, k);
        }
    print_message("# longest an item waited while a consumer slept: %lld ms, "
                  "room while a producer slept: %lld ms\n",
                  items_wait.worst, room_waits.worst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        hl_lock_test(test_bounded_buffer_under_faults, &fx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
