/* RedLock holders contending on one name over five masters while masters
 * are killed and restarted, stopped and resumed, and put to sleep: no two
 * holders may overlap unless the earlier one was told its hold was lost,
 * and no master counted as granting may be found without the grant.
 *
 * Short waits make rounds fail all the time; a failed round cancels the
 * member acquires still pending and gives back the grants, and the next
 * round asks the same masters for the same owner.  Whatever the library
 * does to settle the old round on a master (a give-back, a reconcile
 * after an unknown outcome) must not touch the new round's grant there:
 * each grant a holder is told of is read back from the master's hash
 * with a connection of the fixture's own. */
/* ctest-timeout: 180 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "core/runtime/client_state.h"
#include "multi/multi_internal.h"
#include "hilock/client.h"
#include "hilock/error.h"
#include "hilock/multi.h"
#include "hilock/options.h"
#include "support/fixture.h"
#include "support/lock_helpers.h"
#include "support/mutex_checker.h"

#define NMASTERS 5
#define NHOLDERS 4
/* A quorum of five stays possible with two masters out. */
#define MAX_OUT 2
#define LOCK_NAME "rl.faults"

static hl_redis_server *masters[NMASTERS];

/* Bumped by the fault loop before it kills a master and after the master
 * is back: odd while it is dead.  A grant read back on a master whose
 * epoch did not move from before the acquire to after the read came from
 * one process that ran all along, and nothing but the library can have
 * taken it away: a stopped or sleeping master loses nothing, and every
 * lease here outlasts the longest stop many times over. */
static atomic_uint epoch[NMASTERS];
/* Each master's last fault event and when it came, for the reports. */
static _Atomic int64_t event_ms[NMASTERS];
static _Atomic int event_of[NMASTERS];
static const char *const fault_names[] = { "start", "kill -9", "SIGSTOP",
                                           "DEBUG SLEEP", "restart",
                                           "SIGCONT", "waking" };

typedef struct params {
    int64_t node_ms;
    int64_t watchdog_ms;
    int64_t quarantine_ms;
    int64_t connect_ms;
} params;

typedef struct holder {
    pthread_t thread;
    uint32_t id;
    hl_mutex_checker *mc;
    const atomic_bool *stop;
    hilock_redlock *rl;
    hilock_multilock *m;
    unsigned seed;
    /* When the lost callback told this holder, for its current hold. */
    _Atomic uint64_t told_ns;
    atomic_bool done;
    /* Read after the join. */
    int acquired, busy, no_quorum, expired, told;
    long checked;   /* reads of a grant */
    long phantoms;  /* grants found missing */
} holder;

static holder holders[NHOLDERS];
static int nholders_made, nholders_started;
static atomic_bool stopping;

static int open_redlock(hilock_redlock **out, const params *p, char *why,
                        size_t cap)
{
    char buf[NMASTERS][64];
    const char *urls[NMASTERS];
    hilock_options *o = NULL;
    int rc = hilock_options_create(&o);

    for (int i = 0; i < NMASTERS; i++) {
        snprintf(buf[i], sizeof buf[i], "redis://127.0.0.1:%d",
                 hl_redis_server_port(masters[i]));
        urls[i] = buf[i];
    }
    if (rc == HILOCK_OK)
        rc = hilock_options_set_node_timeout_ms(o, p->node_ms);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_quarantine_ms(o, p->quarantine_ms);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_watchdog_timeout_ms(o, p->watchdog_ms);
    if (rc == HILOCK_OK)
        rc = hilock_options_set_connect_timeout_ms(o, p->connect_ms);
    /* Masters come back within a fraction of a second here. */
    if (rc == HILOCK_OK)
        rc = hilock_options_set_reconnect_backoff_ms(o, 10, 100);
    if (rc == HILOCK_OK)
        rc = hilock_redlock_create(out, urls, NMASTERS, o);
    if (rc != HILOCK_OK)
        snprintf(why, cap, "%s: %s", hilock_errname(rc),
                 hilock_last_error());
    hilock_options_free(o);
    return rc;
}

static void on_lost(hilock_multilock *m, uint64_t owner, void *data)
{
    holder *h = data;
    uint64_t none = 0;

    (void)m;
    (void)owner;
    /* The first word counts: that is when the holder had to stop. */
    atomic_compare_exchange_strong(&h->told_ns, &none,
                                   (uint64_t)hl_now_ns());
}

/* Reads back, on each master that granted this round and ran untouched
 * since before the acquire, the owner's field of the lock's hash; masters
 * in *missing, found without it before, are not read again. */
static void check_grants(holder *h, const hilock_member_result *res,
                         const unsigned *before, const char (*fields)[80],
                         const char *when, unsigned *missing)
{
    for (int i = 0; i < NMASTERS; i++) {
        char reply[64];
        int type;

        if (res[i].status != HILOCK_OK || (before[i] & 1u) ||
            (*missing & (1u << i)) || atomic_load(&epoch[i]) != before[i])
            continue;
        type = hl_redis_server_cmd(masters[i], reply, sizeof reply,
                                   "HEXISTS", LOCK_NAME, fields[i],
                                   (char *)NULL);
        if (type != ':' || atomic_load(&epoch[i]) != before[i])
            continue;
        /* A hold the holder was told it lost is no hold it reports. */
        if (atomic_load(&h->told_ns) != 0)
            continue;
        h->checked++;
        if (strcmp(reply, ":1\r\n") == 0)
            continue;
        h->phantoms++;
        *missing |= 1u << i;
        hl_mutex_checker_fail(h->mc,
                              "holder %u: master %d granted, but its hash "
                              "has no field %s (%s; its last event, %s, "
                              "%lld ms before)",
                              h->id, i, fields[i], when,
                              fault_names[atomic_load(&event_of[i])],
                              (long long)(hl_now_ms() -
                                          atomic_load(&event_ms[i])));
    }
}

static void *holder_main(void *arg)
{
    holder *h = arg;
    uint64_t owner = hilock_thread_owner();
    char fields[NMASTERS][80];
    const int64_t wait_max = hl_widen(100);

    for (int i = 0; i < NMASTERS; i++)
        snprintf(fields[i], sizeof fields[i], "%s:%" PRIu64,
                 hilock_client_id(hilock_redlock_client(h->rl, i)), owner);
    while (!atomic_load(h->stop)) {
        hilock_member_result res[NMASTERS];
        unsigned before[NMASTERS];
        int64_t wait_ms = rand_r(&h->seed) % (wait_max + 1);
        uint64_t told;
        unsigned missing = 0;
        long slot;
        int rc;

        for (int i = 0; i < NMASTERS; i++)
            before[i] = atomic_load(&epoch[i]);
        atomic_store(&h->told_ns, 0);
        rc = hilock_multilock_try_acquire(h->m, wait_ms, HILOCK_LEASE_WATCHDOG,
                                          res, sizeof *res, NULL);
        if (rc == HILOCK_EBUSY) {
            h->busy++;
            continue;
        }
        if (rc == HILOCK_ENOQUORUM) {
            h->no_quorum++;
            continue;
        }
        if (rc == HILOCK_EEXPIRED) {
            h->expired++;
            continue;
        }
        if (rc != HILOCK_OK) {
            hl_mutex_checker_fail(h->mc, "holder %u: acquire: %s (%s)",
                                  h->id, hilock_errname(rc),
                                  hilock_last_error());
            break;
        }
        h->acquired++;
        slot = hl_mutex_checker_enter(h->mc, h->id, 0);
        check_grants(h, res, before, (const char (*)[80])fields,
                     "right after the acquire", &missing);
        check_grants(h, res, before, (const char (*)[80])fields,
                     "before the release", &missing);
        told = atomic_load(&h->told_ns);
        if (told != 0) {
            h->told++;
            hl_mutex_checker_told(h->mc, slot, told);
        }
        hl_mutex_checker_exit(h->mc, slot);
        rc = hilock_multilock_release(h->m);
        /* A master that died under the hold cannot confirm its part; the
         * group was given back all the same (a member's release whose
         * answer was lost counts as done: EINDOUBT). */
        if (rc != HILOCK_OK && rc != HILOCK_ELEASELOST &&
            rc != HILOCK_ETIMEDOUT && rc != HILOCK_EIO &&
            rc != HILOCK_ECLOSED && rc != HILOCK_EINDOUBT)
            hl_mutex_checker_fail(h->mc, "holder %u: release: %s (%s)",
                                  h->id, hilock_errname(rc),
                                  hilock_last_error());
    }
    atomic_store(&h->done, true);
    return NULL;
}

/* ---- faults ------------------------------------------------------------- */

enum { UP, KILLED, STOPPED, SLEEPING, QUARANTINED };

typedef struct fault_state {
    int state[NMASTERS];
    int64_t until_ms[NMASTERS];
    int out;
    int kills, stops, sleeps;
} fault_state;

/* The same order as fault_names. */
enum { EV_START, EV_KILL, EV_STOP, EV_SLEEP, EV_RESTART, EV_CONT, EV_WAKE };

static void fault_event(int i, int event)
{
    atomic_store(&event_ms[i], hl_now_ms());
    atomic_store(&event_of[i], event);
    if (event == EV_KILL || event == EV_RESTART)
        atomic_fetch_add(&epoch[i], 1);
}

/* Ends what is due: restarts, resumes, sleeps over, quarantines out. */
static void faults_settle(fault_state *f, const params *p, bool all)
{
    int64_t now = hl_now_ms();

    for (int i = 0; i < NMASTERS; i++) {
        if (f->state[i] == UP || (!all && now < f->until_ms[i]))
            continue;
        switch (f->state[i]) {
        case KILLED:
            hl_fixture_restart(masters[i]);
            fault_event(i, EV_RESTART);
            /* Out of the vote for the quarantine: it still counts as
             * out, so that a quorum stays possible. */
            f->state[i] = QUARANTINED;
            f->until_ms[i] = hl_now_ms() + p->quarantine_ms + p->node_ms;
            if (all)
                f->state[i] = UP;
            break;
        case STOPPED:
            hl_fixture_resume(masters[i]);
            fault_event(i, EV_CONT);
            f->state[i] = UP;
            break;
        case SLEEPING:
            if (!hl_redis_server_ping(masters[i], hl_widen(all ? 5000 : 20))) {
                if (all)
                    fail_msg("master %d did not wake from DEBUG SLEEP", i);
                continue;
            }
            fault_event(i, EV_WAKE);
            f->state[i] = UP;
            break;
        default:
            f->state[i] = UP;
            break;
        }
        if (f->state[i] == UP)
            f->out--;
    }
}

static void fault_start(fault_state *f, unsigned *seed)
{
    int up[NMASTERS], n = 0, i, kind, ms;

    for (i = 0; i < NMASTERS; i++)
        if (f->state[i] == UP)
            up[n++] = i;
    i = up[rand_r(seed) % n];
    /* In turn, so that a short run still has each kind; kills are the
     * fewest, since a restarted master sits out its quarantine. */
    kind = "01212"[(f->kills + f->stops + f->sleeps) % 5] - '0';
    fault_event(i, EV_KILL + kind);
    if (kind == 0) {
        hl_fixture_kill9(masters[i]);
        f->state[i] = KILLED;
        ms = 50 + rand_r(seed) % 250;
        f->kills++;
    } else if (kind == 1) {
        hl_fixture_pause(masters[i]);
        f->state[i] = STOPPED;
        ms = 100 + rand_r(seed) % 200;
        f->stops++;
    } else {
        ms = 200 + rand_r(seed) % 100;
        hl_fixture_debug_sleep(masters[i], ms / 1000.0);
        f->state[i] = SLEEPING;
        f->sleeps++;
    }
    f->until_ms[i] = hl_now_ms() + ms;
    f->out++;
}

/* ---- the test ----------------------------------------------------------- */

static void stop_holders(void)
{
    atomic_store(&stopping, true);
    for (int k = 0; k < nholders_started; k++)
        hl_join_within(holders[k].thread, &holders[k].done,
                       hl_widen(30000));
    for (int k = 0; k < nholders_made; k++) {
        if (holders[k].m != NULL)
            hilock_multilock_destroy(holders[k].m);
        hilock_redlock_destroy(holders[k].rl);
    }
    nholders_made = nholders_started = 0;
}

static int setup(void **state)
{
    (void)state;
    hl_fixture_masters(masters, NMASTERS);
    for (int i = 0; i < NMASTERS; i++) {
        atomic_init(&epoch[i], 0);
        atomic_init(&event_ms[i], hl_now_ms());
        atomic_init(&event_of[i], EV_START);
    }
    atomic_init(&stopping, false);
    nholders_made = nholders_started = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    stop_holders();
    /* Stopping resumes a stopped master first. */
    hl_fixture_stop_masters(masters, NMASTERS);
    return 0;
}

typedef struct voting_want {
    hilock_redlock *rl;
} voting_want;

static bool all_voting(void *arg)
{
    voting_want *w = arg;

    for (int i = 0; i < NMASTERS; i++) {
        hilock_client *c = hilock_redlock_client(w->rl, (size_t)i);

        if (hilock_client_is_connected(c) != 1 || hl_restart_quarantined(c))
            return false;
    }
    return true;
}

static void test_holders_under_faults(void **state)
{
    params p = {
        .node_ms = hl_widen(150),
        .watchdog_ms = hl_widen(2000),
        .connect_ms = hl_widen(500),
    };
    const int64_t run_ms = hl_scaled(30000, 15000);
    hl_mutex_checker *mc = hl_mutex_checker_create(200000, 200);
    fault_state f;
    unsigned seed = (unsigned)hl_now_ns();
    long checked = 0, phantoms = 0;
    int acquired = 0, busy = 0, no_quorum = 0, expired = 0, told = 0;
    int64_t until;
    char why[512];

    (void)state;
    /* Every lease taken here is the watchdog's. */
    p.quarantine_ms = p.watchdog_ms;
    assert_non_null(mc);
    memset(&f, 0, sizeof f);
    for (int k = 0; k < NHOLDERS; k++) {
        holder *h = &holders[k];

        memset(h, 0, sizeof *h);
        h->id = (uint32_t)k;
        h->mc = mc;
        h->stop = &stopping;
        h->seed = seed + (unsigned)k * 7919u;
        atomic_init(&h->told_ns, 0);
        atomic_init(&h->done, false);
        if (open_redlock(&h->rl, &p, why, sizeof why) != HILOCK_OK)
            fail_msg("holder %d: hilock_redlock_create: %s", k, why);
        nholders_made++;
        assert_status(hilock_redlock_multilock_create(&h->m, h->rl, LOCK_NAME),
                      HILOCK_OK);
        assert_status(hilock_multilock_set_lost_callback(h->m, on_lost, h),
                      HILOCK_OK);
    }
    for (int k = 0; k < NHOLDERS; k++) {
        voting_want w = { holders[k].rl };

        /* Fresh masters are in quarantine for a new client at first. */
        if (!hl_wait_until(all_voting, &w,
                           (int)p.quarantine_ms + hl_widen(5000)))
            fail_msg("holder %d: the masters did not all vote", k);
    }
    for (int k = 0; k < NHOLDERS; k++) {
        if (pthread_create(&holders[k].thread, NULL, holder_main,
                           &holders[k]) != 0)
            fail_msg("could not start holder %d", k);
        nholders_started++;
    }

    until = hl_now_ms() + run_ms;
    while (hl_now_ms() < until) {
        faults_settle(&f, &p, false);
        if (f.out < MAX_OUT && rand_r(&seed) % 4 == 0)
            fault_start(&f, &seed);
        /* The pace of the fault schedule, not a wait for an event. */
        hl_sleep_ms(5);
    }
    faults_settle(&f, &p, true);
    stop_holders();

    for (int k = 0; k < NHOLDERS; k++) {
        holder *h = &holders[k];

        acquired += h->acquired;
        busy += h->busy;
        no_quorum += h->no_quorum;
        expired += h->expired;
        told += h->told;
        checked += h->checked;
        phantoms += h->phantoms;
    }
    print_message("holders under faults: %d holds, %d busy, %d no quorum, "
                  "%d expired, %d told of a loss; %ld reads of a grant, "
                  "%ld grants missing; %d kills, %d stops, %d sleeps\n",
                  acquired, busy, no_quorum, expired, told, checked,
                  phantoms, f.kills, f.stops, f.sleeps);
    if (!hl_mutex_checker_verify(mc, false, why, sizeof why))
        fail_msg("%s", why);
    /* The test proves something only if it held, read back and faulted
     * a fair number of times. */
    for (int k = 0; k < NHOLDERS; k++)
        if (holders[k].acquired == 0)
            fail_msg("holder %d never held the lock", k);
    if (checked < hl_scaled(1000, 100))
        fail_msg("only %ld grants were read back", checked);
    if (f.kills == 0 || f.stops == 0 || f.sleeps == 0)
        fail_msg("not every kind of fault happened: %d kills, %d stops, "
                 "%d sleeps", f.kills, f.stops, f.sleeps);
    hl_mutex_checker_free(mc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_holders_under_faults, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
