/* Mutual exclusion through a Sentinel failover: holders on two clients
 * contend for one lock (default policy, replicas=majority) while the
 * master is killed with kill -9.  The sentinels promote a replica, both
 * clients follow, and the checker must find no two critical sections
 * overlapping unless the earlier holder was told its hold was lost.  Its
 * own group: the kill leaves it one node short. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/fixture.h"
#include "support/loop_call.h"
#include "support/mutex_checker.h"
#include "core/runtime/client_state.h"

/* ctest-timeout: 240 */

#define LOCK_NAME "exclusion-through-failover"
#define NCLIENTS 2
#define PER_CLIENT 3
#define NHOLDERS (NCLIENTS * PER_CLIENT)
/* Sections before the kill, and again after both clients moved. */
#define SECTIONS_EACH_SIDE 150

static hl_redis_replicated *group;

static int setup(void **state)
{
    (void)state;
    group = hl_fixture_replicated();
    return group ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hl_redis_replicated_stop(group);
    return 0;
}

typedef struct holder {
    pthread_t thread;
    uint32_t id;
    hl_mutex_checker *mc;
    hilock_lock *lock;
    const atomic_bool *stop;
    unsigned seed;
    _Atomic uint64_t told_ns; /* when the lost callback told this holder */
    /* Read after the join. */
    int acquired, busy, unavailable, told;
} holder;

/* Each holder has a handle of its own, so the callback is its alone. */
static void on_lost(hilock_lock *lock, uint64_t owner, void *data)
{
    (void)lock, (void)owner;
    holder *h = data;
    uint64_t none = 0;
    atomic_compare_exchange_strong(&h->told_ns, &none,
                                   (uint64_t)hl_now_ns());
}

static void *holder_main(void *arg)
{
    holder *h = arg;
    while (!atomic_load(h->stop)) {
        atomic_store(&h->told_ns, 0);
        int64_t wait_ms = rand_r(&h->seed) % 200;
        int rc = hilock_lock_try_acquire(h->lock, wait_ms,
                                         HILOCK_LEASE_WATCHDOG);
        if (rc == HILOCK_EBUSY) {
            h->busy++;
            continue;
        }
        /* While the master is gone: lost connections, timeouts, and
         * grants no replica could acknowledge. */
        if (rc == HILOCK_EIO || rc == HILOCK_ETIMEDOUT ||
            rc == HILOCK_ENOACK) {
            h->unavailable++;
            continue;
        }
        if (rc != HILOCK_OK) {
            hl_mutex_checker_fail(h->mc, "holder %u: acquire: %s (%s)", h->id,
                                  hilock_errname(rc), hilock_last_error());
            break;
        }
        h->acquired++;
        long slot = hl_mutex_checker_enter(h->mc, h->id, 0);
        uint64_t told = atomic_load(&h->told_ns);
        if (told != 0) {
            h->told++;
            hl_mutex_checker_told(h->mc, slot, told);
        }
        hl_mutex_checker_exit(h->mc, slot);
        rc = hilock_lock_release(h->lock);
        /* EINDOUBT: the answer was lost with the master; it counts as
         * released. */
        if (rc != HILOCK_OK && rc != HILOCK_ELEASELOST && rc != HILOCK_EIO &&
            rc != HILOCK_ETIMEDOUT && rc != HILOCK_EINDOUBT)
            hl_mutex_checker_fail(h->mc, "holder %u: release: %s (%s)", h->id,
                                  hilock_errname(rc), hilock_last_error());
    }
    return NULL;
}


typedef struct progress {
    hl_mutex_checker *mc;
    size_t want;
    hilock_client **clients;
    unsigned *moves_before;
} progress;

static bool sections_reached(void *arg)
{
    progress *p = arg;
    return hl_mutex_checker_count(p->mc) >= p->want;
}

static bool both_moved(void *arg)
{
    progress *p = arg;
    for (int i = 0; i < NCLIENTS; i++)
        if (hl_client_master_moves(p->clients[i]) <= p->moves_before[i])
            return false;
    return true;
}

static void test_no_overlap_through_kill9(void **state)
{
    (void)state;
    hilock_client *clients[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
        hilock_options *o = NULL;
        assert_int_equal(hilock_options_create(&o), HILOCK_OK);
        assert_int_equal(hilock_options_set_url(
                             o, hl_redis_replicated_sentinel_url(group)),
                         HILOCK_OK);
        assert_int_equal(hilock_options_replica_ack(o), HILOCK_ACK_MAJORITY);
        clients[i] = NULL;
        int rc = hilock_client_create(&clients[i], o);
        hilock_options_free(o);
        if (rc != HILOCK_OK)
            fail_msg("client: %s: %s", hilock_errname(rc),
                     hilock_last_error());
    }
    hl_mutex_checker *mc = hl_mutex_checker_create(100000, 200);
    assert_non_null(mc);
    atomic_bool stop = false;
    holder holders[NHOLDERS];
    memset(holders, 0, sizeof holders);
    for (int i = 0; i < NHOLDERS; i++) {
        holder *h = &holders[i];
        h->id = (uint32_t)i;
        h->mc = mc;
        h->stop = &stop;
        h->seed = (unsigned)i * 7919u + 1;
        atomic_init(&h->told_ns, 0);
        assert_int_equal(hilock_lock_create(&h->lock, clients[i % NCLIENTS],
                                            LOCK_NAME, strlen(LOCK_NAME)),
                         HILOCK_OK);
        assert_int_equal(hilock_lock_set_lost_callback(h->lock, on_lost, h),
                         HILOCK_OK);
    }
    for (int i = 0; i < NHOLDERS; i++)
        assert_int_equal(pthread_create(&holders[i].thread, NULL,
                                         holder_main, &holders[i]),
                         0);

    unsigned moves_before[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++)
        moves_before[i] = hl_client_master_moves(clients[i]);
    progress p = {mc, SECTIONS_EACH_SIDE, clients, moves_before};
    bool ok = hl_wait_until(sections_reached, &p, hl_widen(30000));
    hl_redis_server *master = hl_redis_replicated_master(group);
    hl_redis_server *now = NULL;
    if (ok && master != NULL) {
        hl_redis_server_kill9(master);
        now = hl_redis_replicated_wait_master(group, master, 60000);
    }
    bool moved = now != NULL && hl_wait_until(both_moved, &p, 30000);
    size_t at_move = hl_mutex_checker_count(mc);
    p.want = at_move + SECTIONS_EACH_SIDE;
    bool after = moved && hl_wait_until(sections_reached, &p,
                                        hl_widen(60000));
    atomic_store(&stop, true);
    for (int i = 0; i < NHOLDERS; i++)
        pthread_join(holders[i].thread, NULL);

    int acquired = 0, busy = 0, unavailable = 0, told = 0;
    for (int i = 0; i < NHOLDERS; i++) {
        acquired += holders[i].acquired;
        busy += holders[i].busy;
        unavailable += holders[i].unavailable;
        told += holders[i].told;
    }
    printf("# %d sections (%zu before the move), %d busy, %d unavailable "
           "while failing over, %d told of a loss\n",
           acquired, at_move, busy, unavailable, told);
    char why[512];
    bool clean = hl_mutex_checker_verify(mc, false, why, sizeof why);
    for (int i = 0; i < NHOLDERS; i++)
        hilock_lock_destroy(holders[i].lock);
    for (int i = 0; i < NCLIENTS; i++)
        hilock_client_destroy(clients[i]);
    hl_mutex_checker_free(mc);
    assert_true(ok);
    assert_non_null(now);
    assert_true(moved);
    assert_true(after);
    if (!clean)
        fail_msg("%s", why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_overlap_through_kill9),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
