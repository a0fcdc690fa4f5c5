/* Mutual exclusion through a Sentinel failover: holders on two clients
 * contend for one lock (default policy, replicas=majority, the watchdog
 * lease, turns between the clients; see support/contenders.h) while the
 * master is killed with kill -9.  The sentinels promote a replica, both
 * clients follow, and the checker must find no two critical sections
 * overlapping unless the earlier holder was told its hold was lost.  Its
 * own group: the kill leaves it one node short. */
/* ctest-timeout: 240 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "hilock/hilock.h"
#include "support/contenders.h"
#include "support/fixture.h"
#include "support/loop_call.h"
#include "support/mutex_checker.h"

#define LOCK_NAME "exclusion-through-failover"
#define NCLIENTS 2
#define PER_CLIENT 3
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
    const char *what = "kill -9";
    hilock_client *clients[NCLIENTS];
    unsigned moves_before[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
        hilock_options *o = NULL;
        assert_int_equal(hilock_options_create(&o), HILOCK_OK);
        assert_int_equal(hilock_options_set_url(
                             o, hl_redis_replicated_sentinel_url(group)),
                         HILOCK_OK);
        hl_contenders_policy(o);
        clients[i] = NULL;
        int rc = hilock_client_create(&clients[i], o);
        hilock_options_free(o);
        if (rc != HILOCK_OK)
            fail_msg("client: %s: %s", hilock_errname(rc),
                     hilock_last_error());
        moves_before[i] = hl_client_master_moves(clients[i]);
    }
    hl_mutex_checker *mc = hl_mutex_checker_create(100000, 200);
    assert_non_null(mc);
    hl_contenders *g = hl_contenders_start(clients, NCLIENTS, PER_CLIENT,
                                           LOCK_NAME, mc);

    progress p = {mc, SECTIONS_EACH_SIDE, clients, moves_before};
    bool ok = hl_wait_until(sections_reached, &p, hl_widen(30000));
    hl_redis_server *master = hl_redis_replicated_master(group);
    hl_redis_server *now = NULL;
    int64_t killed_ns = 0;
    if (ok && master != NULL) {
        hl_redis_server_kill9(master);
        killed_ns = hl_now_ns();
        hl_contenders_mark_asked(g, killed_ns);
        now = hl_redis_replicated_wait_master(group, master, 60000);
    }
    bool moved = now != NULL && hl_wait_until(both_moved, &p, 30000);
    int64_t moved_ns = hl_now_ns();
    if (moved)
        hl_contenders_mark_switched(g, moved_ns);
    size_t at_move = hl_mutex_checker_count(mc);
    p.want = at_move + SECTIONS_EACH_SIDE;
    bool after = moved && hl_wait_until(sections_reached, &p,
                                        hl_widen(60000));
    hl_contenders_stop(g);

    if (moved)
        printf("# %s: both clients on the new master %.1f ms after the "
               "kill; %zu sections before it\n",
               what, (double)(moved_ns - killed_ns) / 1e6, at_move);
    hl_contenders_report(g, what);
    char why[512];
    bool clean = hl_contenders_verdict(g, what, why, sizeof why);
    hl_contenders_free(g);
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
