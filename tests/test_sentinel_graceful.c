/* Mutual exclusion through a Sentinel failover that leaves the old
 * master running: holders on two clients contend for one lock (default
 * policy, replicas=majority, the watchdog lease) while a sentinel is
 * asked to fail over (SENTINEL FAILOVER) with every node up.  The
 * sentinels promote a replica and turn the old master into its replica,
 * both clients follow, and the checker must find no two critical
 * sections overlapping unless the earlier holder was told its hold was
 * lost.  Its own group: the failover changes its roles. */
/* ctest-timeout: 240 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "hilock/hilock.h"
#include "support/contenders.h"
#include "support/fixture.h"
#include "support/loop_call.h"
#include "support/mutex_checker.h"

#define LOCK_NAME "exclusion-through-graceful-failover"
#define NCLIENTS 2
#define PER_CLIENT 3
/* Sections before the failover is asked for, and again after both
 * clients moved. */
#define SECTIONS_EACH_SIDE 150

static hl_redis_replicated *group;
static char reply[4096]; /* the main thread's */

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
} progress;

static bool sections_reached(void *arg)
{
    progress *p = arg;
    return hl_mutex_checker_count(p->mc) >= p->want;
}

static double ms_between(int64_t from_ns, int64_t to_ns)
{
    return (double)(to_ns - from_ns) / 1e6;
}

/* When each step of the failover was first seen (hl_now_ns; 0: not
 * yet): a node other than the old master calls itself master, the old
 * master calls itself a replica, the sentinels and nodes agree
 * (hl_redis_replicated_master), each client moved. */
typedef struct failover_watch {
    hl_redis_server *old;
    hilock_client **clients;
    unsigned *moves_before;
    hl_contenders *contenders; /* told when both clients moved */
    hl_mutex_checker *mc;
    size_t at_move; /* sections when both clients had moved */
    int64_t promoted_ns, demoted_ns, agreed_ns, moved_ns;
    int64_t client_moved_ns[NCLIENTS];
    hl_redis_server *agreed;
} failover_watch;

static bool role_is(hl_redis_server *s, const char *role)
{
    return hl_redis_server_cmd(s, reply, sizeof reply, "INFO", "replication",
                               (char *)NULL) == '$' &&
           strstr(reply, role) != NULL;
}

static bool failover_seen(void *arg)
{
    failover_watch *w = arg;
    int64_t now = hl_now_ns();
    if (w->promoted_ns == 0)
        for (size_t i = 0; i < hl_redis_replicated_nodes(group); i++) {
            hl_redis_server *n = hl_redis_replicated_node(group, i);
            if (n != w->old && role_is(n, "role:master"))
                w->promoted_ns = now;
        }
    if (w->demoted_ns == 0 && role_is(w->old, "role:slave"))
        w->demoted_ns = now;
    if (w->agreed == NULL) {
        hl_redis_server *m = hl_redis_replicated_master(group);
        if (m != NULL && m != w->old) {
            w->agreed = m;
            w->agreed_ns = now;
        }
    }
    bool all = true;
    for (int i = 0; i < NCLIENTS; i++) {
        if (w->client_moved_ns[i] == 0 &&
            hl_client_master_moves(w->clients[i]) > w->moves_before[i])
            w->client_moved_ns[i] = now;
        all = all && w->client_moved_ns[i] != 0;
    }
    if (all && w->moved_ns == 0) {
        w->moved_ns = now;
        w->at_move = hl_mutex_checker_count(w->mc);
        hl_contenders_mark_switched(w->contenders, now);
    }
    return w->agreed != NULL && w->moved_ns != 0;
}

static void failover_report(const failover_watch *w, int64_t asked_ns,
                            const char *what)
{
    const int64_t at[] = {w->promoted_ns, w->demoted_ns, w->agreed_ns,
                          w->client_moved_ns[0], w->client_moved_ns[1]};
    const char *name[] = {"a replica called itself master",
                          "the old master called itself a replica",
                          "the sentinels and nodes agreed",
                          "client 0 moved", "client 1 moved"};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        if (at[i] != 0)
            printf("# %s: %s %.1f ms after the failover was asked for\n",
                   what, name[i], ms_between(asked_ns, at[i]));
        else
            printf("# %s: %s: not seen\n", what, name[i]);
}

static hilock_client *client_on_sentinels(void)
{
    hilock_options *o = NULL;
    assert_int_equal(hilock_options_create(&o), HILOCK_OK);
    assert_int_equal(hilock_options_set_url(
                         o, hl_redis_replicated_sentinel_url(group)),
                     HILOCK_OK);
    hl_contenders_policy(o);
    hilock_client *c = NULL;
    int rc = hilock_client_create(&c, o);
    hilock_options_free(o);
    if (rc != HILOCK_OK)
        fail_msg("client: %s: %s", hilock_errname(rc), hilock_last_error());
    return c;
}

static void test_no_overlap_through_sentinel_failover(void **state)
{
    (void)state;
    const char *what = "SENTINEL FAILOVER";
    hl_redis_server *old = hl_redis_replicated_wait_master(group, NULL,
                                                           hl_widen(30000));
    assert_non_null(old);
    hilock_client *clients[NCLIENTS];
    unsigned moves_before[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
        clients[i] = client_on_sentinels();
        moves_before[i] = hl_client_master_moves(clients[i]);
    }
    hl_mutex_checker *mc = hl_mutex_checker_create(100000, 200);
    assert_non_null(mc);
    hl_contenders *g = hl_contenders_start(clients, NCLIENTS, PER_CLIENT,
                                           LOCK_NAME, mc);

    progress p = {mc, SECTIONS_EACH_SIDE};
    bool before = hl_wait_until(sections_reached, &p, hl_widen(30000));
    size_t at_ask = hl_mutex_checker_count(mc);
    int answer = 0;
    hl_redis_server *now = NULL;
    bool moved = false, after = false;
    int64_t asked_ns = 0;
    size_t at_settled = 0;
    if (before) {
        answer = hl_redis_server_cmd(hl_redis_replicated_sentinel(group, 0),
                                     reply, sizeof reply, "SENTINEL",
                                     "FAILOVER",
                                     hl_redis_replicated_master_name(group),
                                     (char *)NULL);
        asked_ns = hl_now_ns();
        hl_contenders_mark_asked(g, asked_ns);
    }
    failover_watch w = {.old = old, .clients = clients,
                        .moves_before = moves_before, .contenders = g,
                        .mc = mc};
    if (answer == '+') {
        /* Each step of the failover as it comes, until the sentinels
         * agree on a new master and both clients moved to it. */
        moved = hl_wait_until(failover_seen, &w, hl_widen(60000));
        now = w.agreed;
        at_settled = hl_mutex_checker_count(mc);
    }
    if (moved) {
        p.want = at_settled + SECTIONS_EACH_SIDE;
        after = hl_wait_until(sections_reached, &p, hl_widen(60000));
    }
    hl_contenders_stop(g);

    printf("# %s: %zu sections before the failover was asked for, %zu "
           "before both clients moved, %zu before the sentinels agreed\n",
           what, at_ask, w.at_move, at_settled);
    if (answer == '+')
        failover_report(&w, asked_ns, what);
    hl_contenders_report(g, what);
    char why[512];
    bool clean = hl_contenders_verdict(g, what, why, sizeof why);
    hl_contenders_free(g);
    for (int i = 0; i < NCLIENTS; i++)
        hilock_client_destroy(clients[i]);
    hl_mutex_checker_free(mc);
    assert_true(before);
    if (answer != '+')
        fail_msg("SENTINEL FAILOVER: %s", reply);
    assert_non_null(now);
    assert_true(now != old);
    assert_true(hl_redis_server_is_running(old));
    assert_true(moved);
    assert_true(after);
    if (!clean)
        fail_msg("%s", why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_overlap_through_sentinel_failover),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
