/* A release the replicas did not acknowledge, lost in a real failover,
 * is made again on the new master.
 *
 * The recipe: both replicas are paused (SIGSTOP) and a large write fills
 * their links, so that what the master writes after it stays in the
 * master's own buffer; the client releases (OK, though unacknowledged);
 * the master is killed and the replicas resumed; Sentinel promotes one
 * that still has what was released.  The client that released must make
 * the release again there: a lock's hold must not keep others out until
 * its lease runs out, and a plain semaphore's permits must come back,
 * exactly once.  One group: each case fails the master over once. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/raw_reads.h"
#include "support/loop_call.h"
#include "core/runtime/runtime.h"

/* ctest-timeout: 180 */

/* Past the kernel's buffers on a loopback link, both ends together. */
#define FILL_BYTES (32 << 20)
/* One write of the filling: a master building or sending 32 MB in one
 * command answers nobody meanwhile, which on a loaded machine lasted
 * past Sentinel's down-after and had it fail over a master that ran. */
#define FILL_PIECE_BYTES (1 << 20)
/* Sentinel's down-after: a master that stops answering for less than
 * this while it runs is not failed over.  With 1 s, a master slowed by
 * a loaded machine was, on Sentinel's own, before or while the case
 * wrote, and the node promoted was not the one the case prepared. */
#define DOWN_AFTER_MS 5000
/* The lease of the released hold: far past the bound the case asserts. */
#define LONG_LEASE_MS 60000
/* How soon after the client's move a contender must have the lock. */
#define SOON_MS 10000

static hl_redis_replicated *group;
static hl_redis_server *dead[8];
static size_t ndead;

static int setup(void **state)
{
    (void)state;
    hl_redis_replicated_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.replicas = 2;
    cfg.sentinels = 3;
    cfg.down_after_ms = DOWN_AFTER_MS;
    group = hl_redis_replicated_start(&cfg);
    return group ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

static bool is_dead(const hl_redis_server *s)
{
    for (size_t i = 0; i < ndead; i++)
        if (dead[i] == s)
            return true;
    return false;
}

/* The running nodes other than the master, into out; their number. */
static size_t replicas_of(const hl_redis_server *master,
                          hl_redis_server **out)
{
    size_t n = 0;
    for (size_t i = 0; i < hl_redis_replicated_nodes(group); i++) {
        hl_redis_server *s = hl_redis_replicated_node(group, i);
        if (s != master && !is_dead(s))
            out[n++] = s;
    }
    return n;
}

typedef struct acked_probe {
    hl_redis_server *master;
    size_t replicas;
} acked_probe;

/* Every replica has all the master wrote. */
static bool all_acked(void *arg)
{
    acked_probe *p = arg;
    char reply[64], want[64], n[16];
    snprintf(n, sizeof n, "%zu", p->replicas);
    snprintf(want, sizeof want, ":%zu\r\n", p->replicas);
    return hl_redis_server_cmd(p->master, reply, sizeof reply, "WAIT", n,
                               "1000", (char *)NULL) == ':' &&
           strcmp(reply, want) == 0;
}

/* The settled master, with every running replica caught up. */
static hl_redis_server *settled_master(void)
{
    hl_redis_server *m = hl_redis_replicated_wait_master(group, NULL,
                                                         hl_widen(30000));
    assert_non_null(m);
    hl_redis_server *r[8];
    acked_probe p = {m, replicas_of(m, r)};
    assert_true(p.replicas > 0);
    assert_true(hl_wait_until(all_acked, &p, hl_widen(30000)));
    return m;
}

/* A client of the sentinels that asks every replica to acknowledge. */
static hilock_client *sentinel_client(int64_t watchdog_ms)
{
    hilock_options *o;
    hilock_client *c;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(
        hilock_options_set_url(o, hl_redis_replicated_sentinel_url(group)),
        HILOCK_OK);
    assert_int_equal(hilock_options_set_connect_timeout_ms(o, hl_widen(1000)),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_replica_ack(o, HILOCK_ACK_ALL),
                     HILOCK_OK);
    assert_int_equal(hilock_options_set_replica_ack_timeout_ms(o, 300),
                     HILOCK_OK);
    if (watchdog_ms > 0)
        assert_int_equal(
            hilock_options_set_watchdog_timeout_ms(o, watchdog_ms),
            HILOCK_OK);
    assert_int_equal(hilock_client_create(&c, o), HILOCK_OK);
    hilock_options_free(o);
    return c;
}

/* The replicas stop reading, and large writes fill their links: what
 * the master writes next stays in its own buffer.  Before that, every
 * replica has what the case wrote: a replica that left the master (one
 * Sentinel promoted behind the case's back) would come back as a master
 * that never had it. */
static size_t cut_replicas(hl_redis_server *master, hl_redis_server **r)
{
    size_t n = replicas_of(master, r);
    acked_probe p = {master, n};
    /* Not widened: the servers answer, not the process under valgrind. */
    if (!hl_wait_until(all_acked, &p, 10000))
        fail_msg("the replicas do not have what the case wrote: a failover "
                 "the case did not make?");
    for (size_t i = 0; i < n; i++)
        hl_fixture_pause(r[i]);
    char reply[64], piece[16];
    snprintf(piece, sizeof piece, "%d", FILL_PIECE_BYTES);
    for (int i = 0; i < FILL_BYTES / FILL_PIECE_BYTES; i++) {
        char key[32];
        snprintf(key, sizeof key, "failover-filler:%d", i);
        assert_int_equal(
            hl_redis_server_cmd(master, reply, sizeof reply, "EVAL",
                                "redis.call('set', KEYS[1], "
                                "string.rep('x', tonumber(ARGV[1]))) "
                                "return 1",
                                "1", key, piece, (char *)NULL),
            ':');
    }
    return n;
}

/* kill -9 of the master, the replicas resumed, and Sentinel promotes
 * one of them, to which client moves.  The new master. */
static hl_redis_server *fail_over(hl_redis_server *master,
                                  hl_redis_server **r, size_t n,
                                  hilock_client *client)
{
    hl_moves_probe p = {client, hl_client_master_moves(client)};
    hl_fixture_kill9(master);
    dead[ndead++] = master;
    for (size_t i = 0; i < n; i++)
        hl_fixture_resume(r[i]);
    hl_redis_server *now = hl_redis_replicated_wait_master(group, master,
                                                           hl_widen(60000));
    assert_non_null(now);
    assert_true(hl_wait_until(hl_client_has_moved, &p, hl_widen(30000)));
    return now;
}

static void count_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner;
    atomic_fetch_add((atomic_int *)data, 1);
}

static void master_changed(hilock_client *c, void *arg)
{
    (void)arg;
    hl_client_master_changed(c, "the test says so");
}

/* A hold released without acknowledgement comes back with the failover;
 * its owner never acquires again.  The contender gets the lock soon after
 * the client's move, not when the hold's lease of a minute runs out; the
 * owner's release stands, it holds nothing and loses nothing.  Made
 * again at a later master change, the release leaves the owner's newer
 * hold alone. */
static void test_released_hold_is_released_again(void **state)
{
    (void)state;
    hl_redis_server *master = settled_master();
    hilock_client *a = sentinel_client(LONG_LEASE_MS);
    hilock_client *b = sentinel_client(0);
    hilock_lock *la, *lb;
    assert_int_equal(hilock_lock_create(&la, a, "stuck"), HILOCK_OK);
    assert_int_equal(hilock_lock_create(&lb, b, "stuck"), HILOCK_OK);
    atomic_int lost = 0;
    assert_int_equal(hilock_lock_set_lost_callback(la, count_lost, &lost),
                     HILOCK_OK);
    assert_int_equal(hilock_lock_acquire(la), HILOCK_OK);

    hl_redis_server *r[8];
    size_t n = cut_replicas(master, r);
    assert_int_equal(hilock_lock_release(la), HILOCK_OK);
    assert_false(hl_raw_exists(master, "stuck") == 1);
    hl_redis_server *now = fail_over(master, r, n, a);
    int64_t moved_at = hl_now_ms();

    int rc = hilock_lock_try_acquire(lb, SOON_MS, 10000);
    int64_t took_ms = hl_now_ms() - moved_at;
    if (rc != HILOCK_OK)
        fail_msg("the contender after the failover: %s (%s)",
                 hilock_errname(rc), hilock_last_error());
    printf("# the client's move to the contender's grant: %lld ms\n",
           (long long)took_ms);
    assert_true(took_ms < SOON_MS);
    assert_true(hl_raw_exists(now, "stuck") == 1);

    int64_t count = -1;
    assert_int_equal(hilock_lock_hold_count(la, &count), HILOCK_OK);
    assert_int_equal(count, 0);
    hilock_client_stats stats;
    assert_int_equal(hl_client_counters(a, &stats), HILOCK_OK);
    assert_int_equal(stats.leases_active, 0);
    assert_int_equal(atomic_load(&lost), 0);
    assert_int_equal(hilock_lock_release(lb), HILOCK_OK);

    assert_int_equal(hilock_lock_try_acquire(la, hl_widen(10000), 0),
                     HILOCK_OK);
    hl_run_on_loop(a, master_changed, NULL);
    assert_int_equal(hilock_lock_hold_count(la, &count), HILOCK_OK);
    assert_int_equal(count, 1);
    assert_int_equal(hilock_lock_release(la), HILOCK_OK);
    assert_int_equal(atomic_load(&lost), 0);

    hilock_lock_destroy(la);
    hilock_lock_destroy(lb);
    hilock_client_destroy(b);
    hilock_client_destroy(a);
}

typedef struct available_probe {
    hilock_semaphore *sem;
    int64_t want;
    int64_t last;
    int rc;
} available_probe;

/* A failed call reads as 0 free too: rc tells the two apart. */
static bool available_is(void *arg)
{
    available_probe *p = arg;
    p->rc = hilock_semaphore_available(p->sem, &p->last);
    return p->rc == HILOCK_OK && p->last == p->want;
}

/* Plain permits given back without acknowledgement come back with the
 * failover taken again.  Both releases, one by the record of the grant
 * it gives back and one by a record of its own, are made again on the
 * new master: every permit is free again, none twice, also after another
 * master change makes them again. */
static void test_released_permits_come_back_once(void **state)
{
    (void)state;
    enum { N = 5 };
    hl_redis_server *master = settled_master();
    hilock_client *a = sentinel_client(0);
    hilock_semaphore *taker, *other;
    assert_int_equal(hilock_semaphore_create(&taker, a, "pool"),
                     HILOCK_OK);
    assert_int_equal(hilock_semaphore_create(&other, a, "pool"),
                     HILOCK_OK);
    assert_int_equal(hilock_semaphore_set(taker, N), HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_acquire(taker, 3, 0), HILOCK_OK);
    assert_int_equal(hilock_semaphore_try_acquire(taker, 1, 0), HILOCK_OK);

    hl_redis_server *r[8];
    size_t n = cut_replicas(master, r);
    /* The first consumes the record of the grant of 3; the other handle
     * kept no grant, and writes a record of its own. */
    assert_int_equal(hilock_semaphore_release(taker, 3), HILOCK_OK);
    assert_int_equal(hilock_semaphore_release(other, 1), HILOCK_OK);
    available_probe p = {.sem = taker, .want = N};
    assert_true(available_is(&p));
    fail_over(master, r, n, a);

    if (!hl_wait_until(available_is, &p, SOON_MS))
        fail_msg("%lld permits free after the failover, not %d (%s)",
                 (long long)p.last, N,
                 p.rc == HILOCK_OK ? "read" : hilock_errname(p.rc));
    hl_run_on_loop(a, master_changed, NULL);
    /* Behind the releases made again, on the same connection. */
    assert_int_equal(hilock_semaphore_available(taker, &p.last), HILOCK_OK);
    assert_int_equal(p.last, N);

    hilock_semaphore_destroy(taker);
    hilock_semaphore_destroy(other);
    hilock_client_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_released_hold_is_released_again),
        cmocka_unit_test(test_released_permits_come_back_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
